"""Issue 23's must-show, the SLURM part: the real OpenCode calls the SLURM MCP server its
workdir's opencode.json names, and `slurm_squeue` lists the real queue of the single-node
SLURM (tests/slurm_cluster.py): a held job this test submitted is in the tool's result, read
from OpenCode's own tool part. No database."""

from __future__ import annotations

import secrets
import subprocess

import pytest

from agentsys.slurm import client as slurm
from tests.mcp_opencode import Workdir, call, output_of, script, start_opencode, write_config
from tests.slurm_cluster import bring_up_slurm

pytestmark = pytest.mark.slow


@pytest.fixture
def held_job(tmp_path):
    bring_up_slurm()
    name = f"mcp-oc-{secrets.token_hex(4)}"
    submitted = subprocess.run(
        ["sbatch", "--parsable", "--hold", "-J", name, "-o", "/dev/null", "--wrap", "sleep 1"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    job_id = int(submitted.stdout.strip().split(";")[0])
    yield job_id, name
    slurm.cancel(job_id)


def test_slurm_squeue_through_opencode_lists_the_real_queue(scripted_llm, tmp_path, held_job):
    job_id, name = held_job
    work = tmp_path / "project"
    work.mkdir()
    write_config(work, slurm=True)
    opencode = start_opencode(scripted_llm, tmp_path / "opencode")
    place = Workdir(opencode, work)
    try:
        scripted_llm.load(script("slurm-queue", call("slurm_squeue")))
        session = place.prompt("slurm-queue")
        [part] = place.tool_parts(session)
        assert part["tool"] == "slurm_squeue"
        rows = output_of(part)
        if isinstance(rows, dict):  # an empty list comes as FastMCP's structured {"result": []}
            rows = rows["result"]
        mine = [row for row in rows if row["job_id"] == str(job_id)]
        assert len(mine) == 1, rows
        assert mine[0]["name"] == name and mine[0]["state"] == "PENDING", mine
        assert "JobHeldUser" in mine[0]["nodelist_or_reason"], mine
    finally:
        place.close()
        opencode.stop()
