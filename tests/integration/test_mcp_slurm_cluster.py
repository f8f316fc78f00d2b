"""The SLURM MCP server as an MCP client meets it: a real stdio subprocess
(`python -m agentsys.mcp.slurm_tools --workdir DIR`) driven by FastMCP's own Client, against
the real single-node SLURM (tests/slurm_cluster.py). Every job submitted here is cancelled.
No database."""

from __future__ import annotations

import asyncio
import re
import sys
import time

import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport
from fastmcp.exceptions import ToolError

from agentsys.slurm import client as slurm
from tests.helpers import REPO
from tests.slurm_cluster import bring_up_slurm

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster():
    bring_up_slurm()


@pytest.fixture
def workdir(cluster, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "tiny.sh").write_text("#!/bin/sh\nsleep 5\n")
    (tmp_path / "outside.sh").write_text("#!/bin/sh\ntrue\n")
    return work


@pytest.fixture
def submitted():
    job_ids: list[int] = []
    yield job_ids
    for job_id in job_ids:
        slurm.cancel(job_id)


def _server(workdir):
    args = ["-m", "agentsys.mcp.slurm_tools", "--workdir", str(workdir)]
    return Client(StdioTransport(sys.executable, args, cwd=str(REPO)))


def _rows(result):
    return result.structured_content["result"]


async def test_a_stdio_client_submits_sees_and_cancels_jobs(workdir, submitted):
    async with _server(workdir) as client:
        partitions = _rows(await client.call_tool("sinfo", {}))
        assert any(row["gres"] == "gpu:2" for row in partitions)

        jobs = []
        for name in ("mcp-test-a", "mcp-test-b"):
            result = await client.call_tool(
                "sbatch", {"script_path": "tiny.sh", "gpus": 0, "job_name": name}
            )
            jobs.append(result.structured_content["job_id"])
            submitted.append(jobs[-1])

        queued = _rows(await client.call_tool("squeue", {"job_ids": jobs}))
        assert {int(row["job_id"]) for row in queued} == set(jobs)
        assert {row["name"] for row in queued} == {"mcp-test-a", "mcp-test-b"}

        record = _rows(
            await client.call_tool("scontrol_show", {"kind": "job", "name": str(jobs[0])})
        )
        assert record[0]["JobId"] == str(jobs[0]) and record[0]["JobName"] == "mcp-test-a"

        await client.call_tool("scancel", {"job_id": jobs[0]})
        # scancel returns before the controller has logged the end: wait for the log line.
        deadline = time.monotonic() + 10
        while True:
            ended = _rows(await client.call_tool("sacct", {"job_ids": [jobs[0]]}))
            if ended or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
        assert ended and ended[0]["state"].startswith("CANCELLED")
        still = _rows(await client.call_tool("squeue", {"job_ids": [jobs[1]]}))
        assert [row["job_id"] for row in still] == [str(jobs[1])]

        with pytest.raises(ToolError, match="outside the workdir"):
            await client.call_tool("sbatch", {"script_path": str(workdir.parent / "outside.sh")})
        with pytest.raises(ToolError, match=re.escape("'..' is not allowed")):
            await client.call_tool("sbatch", {"script_path": "../outside.sh"})
        # The server is still up after the refusals.
        assert _rows(await client.call_tool("squeue", {"job_ids": [jobs[1]]}))


async def test_unknown_names_are_slurm_errors_in_slurms_words(workdir):
    async with _server(workdir) as client:
        with pytest.raises(ToolError, match="scontrol failed"):
            await client.call_tool("scontrol_show", {"kind": "node", "name": "no-such-node"})
        assert _rows(await client.call_tool("squeue", {"job_ids": [60_000_000]})) == []
