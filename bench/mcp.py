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

The first two are read between the instants of Spans and Roundtrips (time.time(), so that they
compare with the calls a test watches: tests/integration/test_bench_mcp_points.py).
"""

import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

# Run as a script, this file's folder leads sys.path, and this file (bench/mcp.py) would then be
# the `mcp` package that FastMCP imports: the folder goes, the checkout comes first.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

from bench._report import percentile, report  # noqa: E402  (after the sys.path fix)
from bench.harness import REPO  # noqa: E402
from bench.spans import Span, span_ms  # noqa: E402

OVERHEAD_SAMPLES = 200
WARMUP = 20
ROUNDTRIPS = 15
FILES = 10_000
LISTINGS = 30


@dataclass(frozen=True)
class Overhead:
    """The timed samples, alternating after the warm-up: get_run through the MCP server, the
    two REST calls it makes made directly, and the one GET /api/runs/{id}."""

    mcp: list[Span]
    rest: list[Span]
    single: list[Span]


def tool_overhead_ms(overhead: Overhead) -> float:
    """p50 of get_run through MCP minus p50 of its two REST calls made directly."""
    through = percentile([span_ms(span) for span in overhead.mcp], 50)
    return through - percentile([span_ms(span) for span in overhead.rest], 50)


@dataclass(frozen=True)
class Roundtrip:
    sent: float  # the prompt handed to OpenCode's client (time.time())
    completed: float  # OpenCode's event saying the tool part completed, read
    tool_time: dict  # OpenCode's own {"start", "end"} of the tool part (epoch ms)


def roundtrip_ms(roundtrip: Roundtrip) -> float:
    return (roundtrip.completed - roundtrip.sent) * 1000


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


async def overhead(
    url: str, token: str, workdir: Path, samples: int = OVERHEAD_SAMPLES, warmup: int = WARMUP
) -> Overhead:
    """get_run through MCP, the same two REST calls, the one GET: alternating."""
    import httpx

    headers = {"X-Auth-Token": token}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30) as http:
        made = await http.post("/api/runs", json={"name": "bench mcp", "command": "true"})
        assert made.status_code == 201, made.text
        run_id = made.json()["id"]

        async def direct() -> Span:
            began = time.time()
            run = await http.get(f"/api/runs/{run_id}")
            metrics = await http.get(f"/api/runs/{run_id}/metrics", params={"max_points": 2})
            ended = time.time()
            assert run.status_code == metrics.status_code == 200
            return Span(began, ended)

        async def one_get() -> Span:
            began = time.time()
            answer = await http.get(f"/api/runs/{run_id}")
            ended = time.time()
            assert answer.status_code == 200
            return Span(began, ended)

        env = {"AGENTSYS_URL": url, "AGENTSYS_API_TOKEN": token}
        async with stdio_server(workdir, env) as client:

            async def through_mcp() -> Span:
                began = time.time()
                result = await client.call_tool("get_run", {"run_id": run_id})
                ended = time.time()
                assert result.structured_content["id"] == run_id
                return Span(began, ended)

            kept = Overhead([], [], [])
            for n in range(warmup + samples):
                timed = (await through_mcp(), await direct(), await one_get())
                if n >= warmup:
                    for spans, span in zip((kept.mcp, kept.rest, kept.single), timed, strict=True):
                        spans.append(span)
    return kept


async def listing_spans(workdir: Path, files: int = FILES, listings: int = LISTINGS) -> list[Span]:
    """list_directory of a folder of `files` files through the server over stdio, `listings`
    times after an untimed first (a cold directory): each from just before the client's call
    to its return, the page checked."""
    folder = workdir / "many"
    folder.mkdir()
    for n in range(files):
        (folder / f"file-{n:05d}.txt").write_bytes(b"x")
    spans = []
    async with stdio_server(workdir, {}) as client:
        for _ in range(listings + 1):
            began = time.time()
            result = await client.call_tool("list_directory", {"path": "many"})
            spans.append(Span(began, time.time()))
            page = result.structured_content
            assert page["total"] == files, page["total"]
            assert len(page["entries"]) == min(files, 1000), len(page["entries"])
    return spans[1:]


def roundtrip_script(count: int = ROUNDTRIPS) -> dict:
    """The model calls quick_bash("true"), then says ok: once a prompt, warm-up included."""
    call = {"tool_call": {"name": "research-agent_quick_bash", "arguments": {"command": "true"}}}
    turns = [{"match": "bench", "steps": [call]}, {"match": "bench", "steps": [{"text": "ok"}]}]
    return {"turns": turns * (count + 1)}


def tools_workdir(work: Path) -> Path:
    """`work`, made, with an opencode.json naming AgentSys's research-agent MCP server."""
    from agentsys.mcp.opencode_config import merge_servers, server_entries

    work.mkdir()
    merge_servers(work, server_entries(work, slurm=False))
    return work


async def timed_roundtrips(opencode, work: Path, count: int = ROUNDTRIPS) -> list[Roundtrip]:
    """`count` prompts of roundtrip_script through `opencode` (its url and password), in one
    session, after a first that starts the MCP server (not kept)."""
    from agentsys.opencode.client import OpenCodeClient

    client = OpenCodeClient(opencode.url, password=opencode.password, directory=str(work))
    session = await client.create_session()
    kept = []
    try:
        for _ in range(count + 1):
            done = {}

            def on_part(update, done=done):
                if update["kind"] == "tool" and update["status"] == "completed":
                    done.setdefault("at", time.time())
                    done["time"] = update["time"]
                    done["output"] = update["output"]

            sent = time.time()
            await client.prompt(
                session, "bench", provider="demo", model="demo-research", on_part=on_part
            )
            assert json.loads(done["output"])["exit_code"] == 0, done
            kept.append(Roundtrip(sent, done["at"], done["time"]))
    finally:
        await client.aclose()
    return kept[1:]  # the first prompt starts the MCP server


def roundtrips(root: Path) -> list[Roundtrip]:
    from agentsys.scripted_llm import ScriptedLLM
    from tests.mcp_opencode import start_opencode

    work = tools_workdir(root / "opencode-work")
    llm = ScriptedLLM(roundtrip_script())
    llm.serve_in_thread()
    opencode = start_opencode(llm, root / "opencode")
    try:
        return asyncio.run(timed_roundtrips(opencode, work))
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
        timed = asyncio.run(overhead(url, TOKEN, root))
        mcp, rest, single = (
            [span_ms(span) for span in spans] for spans in (timed.mcp, timed.rest, timed.single)
        )
        print(
            f"(get_run through MCP p50 {statistics.median(mcp):.2f} ms; its two REST calls "
            f"p50 {statistics.median(rest):.2f} ms; GET /api/runs/{{id}} alone p50 "
            f"{statistics.median(single):.2f} ms; {len(mcp)} samples each)"
        )
        report("mcp_tool_overhead_p50_ms", tool_overhead_ms(timed), "ms")
        timed_trips = roundtrips(root)
        own = [trip.tool_time["end"] - trip.tool_time["start"] for trip in timed_trips]
        print(f"(the tool part's own time p50 {statistics.median(own):.1f} ms)")
        whole = [roundtrip_ms(trip) for trip in timed_trips]
        report("mcp_quick_bash_true_roundtrip_ms", percentile(whole, 50), "ms")
        listed = [span_ms(span) for span in asyncio.run(listing_spans(root))]
        report("mcp_list_directory_10000_files_ms", percentile(listed, 50), "ms")
    finally:
        system.close()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
