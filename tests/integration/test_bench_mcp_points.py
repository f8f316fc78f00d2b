"""bench/mcp.py's figures time what their names say (issue 40 §3), at a tiny size on the real
parts (daphne on the test database, the research-agent MCP server over stdio, the real
OpenCode with the scripted model):

- mcp_tool_overhead_p50_ms: each get_run sample holds its one MCP call and the REST calls the
  server made for it, and each direct sample holds the very same REST calls (seen by a
  recording hop in front of the web), so the difference is what the tool adds; the warm-up
  is in no sample;
- mcp_quick_bash_true_roundtrip_ms: from the prompt handed to OpenCode's client (its POST
  inside) to the line of OpenCode's event stream saying the quick_bash part completed,
  around OpenCode's own start and end of that tool call; the first prompt is in no sample;
- mcp_list_directory_10000_files_ms: each sample is one list_directory call through the
  server over stdio, from just before the client's call to its return, the first (cold) one
  in none."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from fastmcp import Client

from agentsys.opencode import client as opencode_client
from agentsys.opencode.client import OpenCodeClient
from bench import mcp
from bench._report import percentile
from tests.call_watch import watch_awaited, watch_calls
from tests.live_clients import TOKEN, Web

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
SAMPLES, WARMUP, ROUNDTRIPS = 3, 2, 1
FORWARDED = ("content-type", "x-auth-token")


@dataclass(frozen=True)
class Request:
    received: float  # time.time() as the hop read its request line
    method: str
    path: str  # with its query


class _Forward(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keeps the clients' connections alive, as the web does

    def do_GET(self):
        self._forward()

    def do_POST(self):
        self._forward()

    def _forward(self):
        received = time.time()
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        headers = {k: v for k, v in self.headers.items() if k.lower() in FORWARDED}
        with self.server.lock:
            answer = self.server.upstream.request(
                self.command, self.path, content=body or None, headers=headers
            )
        self.server.requests.append(Request(received, self.command, self.path))
        self.send_response(answer.status_code)
        self.send_header("Content-Type", answer.headers.get("content-type", ""))
        self.send_header("Content-Length", str(len(answer.content)))
        self.end_headers()
        self.wfile.write(answer.content)

    def log_message(self, *args):
        pass


@pytest.fixture
def recorded_web():
    """The web, behind a hop that records each request it forwards: (its url, the requests)."""
    web = Web()
    hop = ThreadingHTTPServer(("127.0.0.1", 0), _Forward)
    hop.upstream, hop.lock, hop.requests = httpx.Client(base_url=web.url), threading.Lock(), []
    threading.Thread(target=hop.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{hop.server_address[1]}", hop.requests
    hop.shutdown()
    hop.upstream.close()
    web.stop()


def _during(requests: list[Request], span: mcp.Span) -> list[str]:
    return [f"{r.method} {r.path}" for r in requests if span.began <= r.received <= span.ended]


def test_tool_overhead_samples_hold_the_same_rest_calls_on_both_sides(
    recorded_web, tmp_path, monkeypatch
):
    url, requests = recorded_web
    tools = watch_awaited(monkeypatch, Client, "call_tool")
    gets = watch_awaited(monkeypatch, httpx.AsyncClient, "get")
    timed = asyncio.run(mcp.overhead(url, TOKEN, tmp_path, samples=SAMPLES, warmup=WARMUP))
    assert len(timed.mcp) == len(timed.rest) == SAMPLES
    run_id = tools[0].args[2]["run_id"]
    wrapped = [f"GET /api/runs/{run_id}", f"GET /api/runs/{run_id}/metrics?max_points=2"]
    # The warm-up's calls come first and are in no sample.
    assert len(tools) == WARMUP + SAMPLES
    assert timed.mcp[0].began >= tools[WARMUP - 1].returned
    for through, direct, call in zip(timed.mcp, timed.rest, tools[WARMUP:], strict=True):
        # get_run's sample: from just before its MCP call to just after its answer, holding
        # the REST calls the MCP server made for it and nothing else.
        assert through.began <= call.began and call.returned <= through.ended
        assert _during(requests, through) == wrapped
        # The direct sample holds the same REST calls, made by the bench's own client.
        assert _during(requests, direct) == wrapped
        own = [get for get in gets if direct.began <= get.began and get.returned <= direct.ended]
        assert len(own) == 2
        assert not [tool for tool in tools if direct.began <= tool.began <= direct.ended]
    mcp_ms = [(span.ended - span.began) * 1000 for span in timed.mcp]
    rest_ms = [(span.ended - span.began) * 1000 for span in timed.rest]
    assert mcp.tool_overhead_ms(timed) == pytest.approx(
        percentile(mcp_ms, 50) - percentile(rest_ms, 50)
    )


def _completed_quick_bash(event) -> bool:
    if event is None or event["type"] != "message.part.updated":
        return False
    part = event["properties"].get("part") or {}
    return (
        part.get("type") == "tool"
        and part.get("tool") == "research-agent_quick_bash"
        and part["state"]["status"] == "completed"
    )


def test_quick_bash_roundtrip_runs_from_the_prompt_to_the_tool_part_completed(
    opencode_server, scripted_llm, tmp_path, monkeypatch
):
    work = mcp.tools_workdir(tmp_path / "work")
    scripted_llm.load(mcp.roundtrip_script(ROUNDTRIPS))
    prompts = watch_awaited(monkeypatch, OpenCodeClient, "prompt")
    posts = watch_awaited(monkeypatch, OpenCodeClient, "_call")
    lines = watch_calls(monkeypatch, opencode_client, "parse_sse_line")
    trips = asyncio.run(mcp.timed_roundtrips(opencode_server, work, count=ROUNDTRIPS))
    # The first prompt (it starts the MCP server) is in no sample.
    assert len(prompts) == ROUNDTRIPS + 1 and len(trips) == ROUNDTRIPS
    for trip, prompt in zip(trips, prompts[1:], strict=True):
        # Start: the prompt handed to OpenCode's client, which then sends it.
        assert trip.sent <= prompt.began < trip.sent + 0.1
        [sent] = [p for p in posts if trip.sent <= p.began and p.returned <= prompt.returned]
        assert sent.args[1:] == ("POST", f"/session/{prompt.args[1]}/prompt_async")
        # End: just after the stream's line saying the tool part completed was read (the
        # first such line of this prompt), before the next line and the prompt's own end.
        found = [
            i
            for i, line in enumerate(lines)
            if prompt.began <= line.began <= prompt.returned and _completed_quick_bash(line.result)
        ]
        first = found[0]
        later = lines[first + 1].began if first + 1 < len(lines) else float("inf")
        assert lines[first].returned <= trip.completed <= later
        assert trip.completed < prompt.returned
        # OpenCode's own start and end of the tool call lie inside (its clock is the same).
        part = lines[found[-1]].result["properties"]["part"]  # the bench keeps the last
        assert trip.tool_time == part["state"]["time"]
        assert trip.sent * 1000 <= trip.tool_time["start"] <= trip.tool_time["end"]
        assert trip.tool_time["end"] <= trip.completed * 1000
        assert mcp.roundtrip_ms(trip) == pytest.approx((trip.completed - trip.sent) * 1000)


def test_list_directory_samples_are_each_one_call_the_cold_first_left_out(tmp_path, monkeypatch):
    calls = watch_awaited(monkeypatch, Client, "call_tool")
    spans = asyncio.run(mcp.listing_spans(tmp_path, files=30, listings=3))
    assert [call.args[1] for call in calls] == ["list_directory"] * 4
    cold, *timed = calls
    assert len(spans) == len(timed) == 3
    assert cold.returned <= spans[0].began  # the cold listing is in no sample
    for span, call in zip(spans, timed, strict=True):
        # From just before the client's call to its return: nothing else inside.
        assert span.began <= call.began and call.returned <= span.ended
        assert (call.began - span.began) + (span.ended - call.returned) < 0.05
        page = call.result.structured_content
        assert page["total"] == 30 and len(page["entries"]) == 30
        assert mcp.span_ms(span) == pytest.approx((span.ended - span.began) * 1000)
