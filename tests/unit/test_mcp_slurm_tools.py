"""The SLURM MCP server without a cluster: subprocess.run is replaced by a recorder, and every
call goes through FastMCP's own in-memory Client (the real MCP protocol). What a client sees:
the argv SLURM gets (never a shell, never an option smuggled in a value), JSON parsed from
SLURM's parsable output, and a tool error saying why for every bad argument."""

from __future__ import annotations

import subprocess

import fastmcp
import pytest
from fastmcp.exceptions import ToolError

from agentsys.mcp.slurm_tools import WORKDIR_ENV, build_server, main
from agentsys.slurm.client import parse_records


class FakeSlurm:
    """Stands in for subprocess.run: records each argv and answers from `replies`."""

    def __init__(self):
        self.calls: list[list[str]] = []
        self.replies: dict[str, tuple[int, str, str]] = {}
        self.missing = False

    def __call__(self, argv, **kwargs):
        assert isinstance(argv, list) and kwargs.get("shell") is not True
        self.calls.append(argv)
        if self.missing:
            raise FileNotFoundError(argv[0])
        code, out, err = self.replies.get(argv[0], (0, "", ""))
        return subprocess.CompletedProcess(argv, code, out, err)


@pytest.fixture
def fake(monkeypatch):
    fake = FakeSlurm()
    monkeypatch.setattr(subprocess, "run", fake)
    return fake


@pytest.fixture
def workdir(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "train.sh").write_text("#!/bin/sh\necho hi\n")
    (tmp_path / "outside.sh").write_text("#!/bin/sh\necho out\n")
    return work


async def call(workdir, tool, args):
    async with fastmcp.Client(build_server(workdir)) as client:
        result = await client.call_tool(tool, args)
    data = result.structured_content
    return data["result"] if set(data) == {"result"} else data


async def refused(workdir, tool, args) -> str:
    with pytest.raises(ToolError) as error:
        await call(workdir, tool, args)
    return str(error.value)


async def test_the_server_offers_the_six_slurm_tools(workdir):
    async with fastmcp.Client(build_server(workdir)) as client:
        names = {tool.name for tool in await client.list_tools()}
    assert names == {"squeue", "sinfo", "sbatch", "scancel", "sacct", "scontrol_show"}


async def test_squeue_passes_filters_as_single_options_and_parses_rows(fake, workdir):
    fake.replies["squeue"] = (0, "12|debug|ana|RUNNING|0:05|1:00:00|1|vm|gpu:1|my|job\n", "")
    rows = await call(workdir, "squeue", {"job_ids": [12, 13], "user": "ana", "partition": "gpu"})
    argv = fake.calls[0]
    assert argv[:2] == ["squeue", "-h"]
    assert argv[-3:] == ["--jobs=12,13", "--user=ana", "--partition=gpu"]
    assert rows == [
        {
            "job_id": "12",
            "partition": "debug",
            "user": "ana",
            "state": "RUNNING",
            "time": "0:05",
            "time_limit": "1:00:00",
            "nodes": "1",
            "nodelist_or_reason": "vm",
            "gres": "gpu:1",
            "name": "my|job",  # the name goes last, so a '|' in it stays in it
        }
    ]


async def test_squeue_of_ids_no_longer_queued_is_an_empty_list(fake, workdir):
    fake.replies["squeue"] = (1, "", "slurm_load_jobs error: Invalid job id specified\n")
    assert await call(workdir, "squeue", {"job_ids": [99]}) == []


async def test_sinfo_parses_partitions(fake, workdir):
    fake.replies["sinfo"] = (0, "debug*|up|infinite|1|idle|vm|gpu:2\n", "")
    rows = await call(workdir, "sinfo", {"partition": "debug"})
    assert fake.calls[0][-1] == "--partition=debug"
    assert rows[0]["partition"] == "debug*" and rows[0]["gres"] == "gpu:2"


async def test_sacct_reads_the_completion_log_and_keeps_the_last_line_of_an_id(fake, workdir):
    old = "7|root(0)|debug|COMPLETED|t0|t1|0:0|vm|old"
    new = "7|root(0)|debug|FAILED|t2|t3|1:0|vm|new"
    fake.replies["sacct"] = (0, f"{old}\n{new}\n", "")
    rows = await call(workdir, "sacct", {"job_ids": [7]})
    assert fake.calls[0][:5] == ["sacct", "-c", "-P", "-n", "-o"]
    assert fake.calls[0][-1] == "--jobs=7"
    assert rows == [
        {
            "jobid": "7",
            "user": "root(0)",
            "partition": "debug",
            "state": "FAILED",
            "start": "t2",
            "end": "t3",
            "exitcode": "1:0",
            "nodelist": "vm",
            "jobname": "new",
        }
    ]


async def test_scontrol_show_splits_one_line_records_into_fields(fake, workdir):
    line = "NodeName=vm Arch=x86_64 OS=Linux 6.1 #1 SMP  Gres=gpu:2 State=IDLE"
    fake.replies["scontrol"] = (0, line + "\n", "")
    records = await call(workdir, "scontrol_show", {"kind": "node", "name": "vm"})
    assert fake.calls[0] == ["scontrol", "show", "-o", "node", "vm"]
    assert records == [
        {
            "NodeName": "vm",
            "Arch": "x86_64",
            "OS": "Linux 6.1 #1 SMP",
            "Gres": "gpu:2",
            "State": "IDLE",
        }
    ]


def test_records_keep_values_with_equals_signs():
    text = "JobId=5 Command=/w/run.sh --lr=0.1 TRES=cpu=1,mem=1G\n"
    assert parse_records(text) == [
        {"JobId": "5", "Command": "/w/run.sh --lr=0.1", "TRES": "cpu=1,mem=1G"}
    ]


async def test_scancel_asks_scancel_verbosely_and_says_its_refusal(fake, workdir):
    assert await call(workdir, "scancel", {"job_id": 42}) == {"job_id": 42, "cancelled": True}
    assert fake.calls[0] == ["scancel", "-v", "42"]
    fake.replies["scancel"] = (
        0,
        "",
        "scancel: error: Kill job error on job id 43: Access denied\n",
    )
    assert "Access denied" in await refused(workdir, "scancel", {"job_id": 43})


async def test_sbatch_submits_a_script_inside_the_workdir(fake, workdir):
    fake.replies["sbatch"] = (0, "77\n", "")
    args = {"script_path": "train.sh", "gpus": 1, "partition": "debug", "time_limit": "5:00"}
    assert await call(workdir, "sbatch", args) == {
        "job_id": 77,
        "script": str((workdir / "train.sh").resolve()),
    }
    argv = fake.calls[0]
    assert argv[0] == "sbatch" and argv[-1] == str((workdir / "train.sh").resolve())
    assert "--gres=gpu:1" in argv and "--partition=debug" in argv and "--time=5:00" in argv
    assert f"--chdir={workdir.resolve()}" in argv and "--job-name=train" in argv


@pytest.mark.parametrize(
    ("script_path", "why"),
    [
        ("../outside.sh", "'..' is not allowed"),
        ("sub/../../outside.sh", "'..' is not allowed"),
        ("OUTSIDE", "outside the workdir"),
        ("train.sh\x00.txt", "NUL bytes"),
        ("link.sh", "outside the workdir"),
        ("nothing.sh", "no such file"),
        (".", "not a file"),
        ("x" * 1_000_000, "at most 4096 characters"),
    ],
)
async def test_sbatch_refuses_scripts_not_inside_the_workdir(fake, workdir, script_path, why):
    outside = workdir.parent / "outside.sh"
    (workdir / "link.sh").symlink_to(outside)
    script_path = str(outside) if script_path == "OUTSIDE" else script_path
    assert why in await refused(workdir, "sbatch", {"script_path": script_path})
    assert fake.calls == []


@pytest.mark.parametrize(
    ("tool", "args", "why"),
    [
        ("scancel", {}, "scancel refused: job_id is required."),
        ("scancel", {"job_id": -1}, "greater than or equal to 1"),
        ("scancel", {"job_id": "1; rm -rf /"}, "valid integer"),
        ("scancel", {"job_id": "12"}, "valid integer"),
        ("scancel", {"job_id": True}, "valid integer"),
        ("sacct", {"job_ids": []}, "at least one job id"),
        ("sacct", {"job_ids": ["-j"]}, "valid integer"),
        ("squeue", {"user": "-j"}, "bad user"),
        ("squeue", {"partition": "--wrap=rm -rf /"}, "bad partition"),
        ("squeue", {"user": "a; rm -rf /"}, "bad user"),
        ("sinfo", {"partition": "p" * 1_000_000}, "at most 200 characters"),
        ("scontrol_show", {"kind": "job", "name": "-1"}, "bad job id"),
        ("scontrol_show", {"kind": "node", "name": "-j"}, "bad node"),
        ("scontrol_show", {"kind": "config", "name": "x"}, "'job', 'node' or 'partition'"),
        ("sbatch", {"script_path": "train.sh", "gpus": -1}, "greater than or equal to 0"),
        ("sbatch", {"script_path": "train.sh", "partition": "--wrap=id"}, "bad partition"),
        ("sbatch", {"script_path": "train.sh", "job_name": "-x"}, "bad job_name"),
        ("sbatch", {"script_path": "train.sh", "time_limit": "1; rm"}, "bad time limit"),
        ("sbatch", {"script_path": 5}, "valid string"),
    ],
)
async def test_bad_arguments_are_tool_errors_saying_why(fake, workdir, tool, args, why):
    assert why in await refused(workdir, tool, args)
    assert fake.calls == []


async def test_slurm_not_installed_is_said(fake, workdir):
    fake.missing = True
    assert "SLURM is not installed" in await refused(workdir, "sinfo", {})
    assert "SLURM is not installed" in await refused(workdir, "sbatch", {"script_path": "train.sh"})


async def test_an_unreachable_controller_is_said(fake, workdir):
    down = "squeue: error: Unable to contact slurm controller (connect failure)\n"
    fake.replies["squeue"] = (1, "", down)
    assert "could not reach slurmctld" in await refused(workdir, "squeue", {})


async def test_the_server_stays_up_after_errors(fake, workdir):
    fake.replies["sinfo"] = (0, "debug*|up|infinite|1|idle|vm|gpu:2\n", "")
    async with fastmcp.Client(build_server(workdir)) as client:
        for args in ({"job_id": -1}, {"job_id": "x" * 1_000_000}):
            with pytest.raises(ToolError):
                await client.call_tool("scancel", args)
        assert (await client.call_tool("sinfo", {})).structured_content["result"][0][
            "state"
        ] == "idle"


def test_the_server_will_not_start_without_a_workdir(monkeypatch, capsys):
    monkeypatch.delenv(WORKDIR_ENV, raising=False)
    with pytest.raises(SystemExit):
        main([])
    assert f"--workdir or {WORKDIR_ENV} is required" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="is not a directory"):
        main(["--workdir", "/no/such/dir"])
