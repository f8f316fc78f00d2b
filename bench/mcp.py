"""MCP figures (issue 23), with a real daphne on a throw-away database (bench/harness.py), the
research-agent MCP server as a real stdio subprocess, and the real OpenCode server with the
project's scripted model:

- mcp_tool_overhead_p50_ms: what a tool adds over the REST calls it wraps. p50 of get_run
  through the MCP server (FastMCP's own Client over stdio) minus p50 of the same REST calls
  made directly with a kept-alive httpx client: get_run makes two (GET /api/runs/{id}, then
  its metrics with max_points=2), and so does the direct side. The p50 of the one
  GET /api/runs/{id} is printed too. Samples alternate, after a warm-up. Goal: ≤ 20 ms.
- mcp_quick_bash_true_roundtrip_ms: quick_bash("true") through OpenCode: from sending the
  prompt to OpenCode reporting the tool part completed (the model's one streamed reply, OpenCode
  calling the tool, the result back), p50 of ROUNDTRIPS after a first prompt that starts the
  server. The tool part's own time (OpenCode's start → end of the call) is printed too.
- mcp_list_directory_10000_files_ms: list_directory of a folder of 10^4 files, first page
  (1,000 entries), through FastMCP's Client over stdio, p50 of LISTINGS.
"""

import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

# Run as a script, this file's folder leads sys.path, and this file (bench/mcp.py) would then be
# the `mcp` package that FastMCP imports: the folder goes, the checkout comes first.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

from bench._report import percentile, report  # noqa: E402  (after the sys.path fix)
from bench.harness import REPO  # noqa: E402

OVERHEAD_SAMPLES = 200
WARMUP = 20
ROUNDTRIPS = 15
FILES = 10_000
LISTINGS = 30


def stdio_server(workdir: Path, env: dict[str, str]):
    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport

    args = ["-m", "agentsys.mcp.research_server", "--workdir", str(workdir)]
    transport = StdioTransport(
        sys.executable,
        args,
        env={"PYTHONPATH": str(REPO), "FASTMCP_LOG_LEVEL": "WARNING", **env},
        cwd=str(workdir),
    )
    return Client(transport)


async def overhead(url: str, token: str, workdir: Path) -> tuple[list, list, list]:
    """(get_run through MCP, the same two REST calls, the one GET) in ms, alternating."""
    import httpx

    headers = {"X-Auth-Token": token}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30) as http:
        made = await http.post("/api/runs", json={"name": "bench mcp", "command": "true"})
        assert made.status_code == 201, made.text
        run_id = made.json()["id"]

        async def direct() -> float:
            start = time.perf_counter()
            run = await http.get(f"/api/runs/{run_id}")
            metrics = await http.get(f"/api/runs/{run_id}/metrics", params={"max_points": 2})
            assert run.status_code == metrics.status_code == 200
            return (time.perf_counter() - start) * 1000

        async def one_get() -> float:
            start = time.perf_counter()
            assert (await http.get(f"/api/runs/{run_id}")).status_code == 200
            return (time.perf_counter() - start) * 1000

        env = {"AGENTSYS_URL": url, "AGENTSYS_API_TOKEN": token}
        async with stdio_server(workdir, env) as client:

            async def through_mcp() -> float:
                start = time.perf_counter()
                result = await client.call_tool("get_run", {"run_id": run_id})
                assert result.structured_content["id"] == run_id
                return (time.perf_counter() - start) * 1000

            mcp, rest, single = [], [], []
            for n in range(WARMUP + OVERHEAD_SAMPLES):
                samples = (await through_mcp(), await direct(), await one_get())
                if n >= WARMUP:
                    for kept, value in zip((mcp, rest, single), samples, strict=True):
                        kept.append(value)
    return mcp, rest, single


async def listing(workdir: Path) -> list[float]:
    folder = workdir / "many"
    folder.mkdir()
    for n in range(FILES):
        (folder / f"file-{n:05d}.txt").write_bytes(b"x")
    times = []
    async with stdio_server(workdir, {}) as client:
        for _ in range(LISTINGS + 1):
            start = time.perf_counter()
            result = await client.call_tool("list_directory", {"path": "many"})
            times.append((time.perf_counter() - start) * 1000)
            page = result.structured_content
            assert page["total"] == FILES and len(page["entries"]) == 1000, page["total"]
    return times[1:]  # the first lists a cold directory


def roundtrips(root: Path) -> tuple[list[float], list[float]]:
    """(prompt → tool part completed, the tool part's own start → end), in ms."""
    from agentsys.mcp.opencode_config import merge_servers, server_entries
    from agentsys.opencode.client import OpenCodeClient
    from agentsys.scripted_llm import ScriptedLLM
    from tests.mcp_opencode import start_opencode

    work = root / "opencode-work"
    work.mkdir()
    merge_servers(work, server_entries(work, slurm=False))
    call = {"tool_call": {"name": "research-agent_quick_bash", "arguments": {"command": "true"}}}
    turns = [{"match": "bench", "steps": [call]}, {"match": "bench", "steps": [{"text": "ok"}]}]
    llm = ScriptedLLM({"turns": turns * (ROUNDTRIPS + 1)})
    llm.serve_in_thread()
    opencode = start_opencode(llm, root / "opencode")

    async def measure() -> tuple[list[float], list[float]]:
        client = OpenCodeClient(opencode.url, password=opencode.password, directory=str(work))
        session = await client.create_session()
        whole, own = [], []
        try:
            for _ in range(ROUNDTRIPS + 1):
                done = {}

                def on_part(update, done=done):
                    if update["kind"] == "tool" and update["status"] == "completed":
                        done.setdefault("at", time.perf_counter())
                        done["time"] = update["time"]
                        done["output"] = update["output"]

                start = time.perf_counter()
                await client.prompt(
                    session, "bench", provider="demo", model="demo-research", on_part=on_part
                )
                assert json.loads(done["output"])["exit_code"] == 0, done
                whole.append((done["at"] - start) * 1000)
                own.append(done["time"]["end"] - done["time"]["start"])
        finally:
            await client.aclose()
        return whole[1:], own[1:]  # the first prompt starts the MCP server

    try:
        return asyncio.run(measure())
    finally:
        opencode.stop()
        llm.stop()


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="agentsys-bench-mcp-"))
    os.environ["AGENTSYS_WORKDIR"] = str(root)
    from bench.harness import TOKEN, BenchSystem
    from tests.helpers import free_port

    system = BenchSystem(port=free_port())
    try:
        system.start_web()
        url = f"http://127.0.0.1:{system.port}"
        mcp, rest, single = asyncio.run(overhead(url, TOKEN, root))
        print(
            f"(get_run through MCP p50 {statistics.median(mcp):.2f} ms; its two REST calls "
            f"p50 {statistics.median(rest):.2f} ms; GET /api/runs/{{id}} alone p50 "
            f"{statistics.median(single):.2f} ms; {len(mcp)} samples each)"
        )
        report("mcp_tool_overhead_p50_ms", percentile(mcp, 50) - percentile(rest, 50), "ms")
        whole, own = roundtrips(root)
        print(f"(the tool part's own time p50 {statistics.median(own):.1f} ms)")
        report("mcp_quick_bash_true_roundtrip_ms", percentile(whole, 50), "ms")
        report(
            "mcp_list_directory_10000_files_ms", percentile(asyncio.run(listing(root)), 50), "ms"
        )
    finally:
        system.close()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
