"""bench/chat.py's figures time what their names say (issue 40 §3), at a tiny size on the real
parts (daphne, runagentd's L1 agent, the real OpenCode and the scripted model):

- a relay sample runs from the line of OpenCode's own event stream that carried a delta, read
  by the bench's client of that stream, to the chat WebSocket frame that first carried the
  same text to the browser-like client, a frame whose event the relay had stored before; the
  warm-up round is in no sample;
- a replay runs from the GET about to be sent (its client already made) to the last line of
  the stored events read, before the answer was closed."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest
from websockets.asyncio.connection import Connection

from agentsys.opencode import events as opencode_events
from bench import chat
from events_app.events import chat_stream
from events_app.models import Event
from sessions_app.services import create_session
from tests.call_watch import Call, watch_awaited, watch_calls
from tests.live_clients import TOKEN, Web

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
WORDS = 24  # a few deltas a reply: enough to pair more than one
REPLAYED = 120


@pytest.fixture
def web(workdir):
    server = Web(AGENTSYS_WORKDIR=str(workdir))
    yield server
    server.stop()


def _with_ends(calls: list[Call], part_and_delta) -> list[tuple[int, str, int]]:
    """(index of the call, part, end offset in its part) of each call that carried a delta."""
    found, ends = [], {}
    for index, call in enumerate(calls):
        carried = part_and_delta(call.result)
        if carried is not None:
            part, delta = carried
            ends[part] = ends.get(part, 0) + len(delta)
            found.append((index, part, ends[part]))
    return found


def _opencode_delta(event) -> tuple[str, str] | None:
    if event and event.get("type") == "message.part.delta":
        return event["properties"]["partID"], event["properties"]["delta"]
    return None


def _socket_delta(frame) -> tuple[str, str] | None:
    message = json.loads(frame)
    if message["kind"] == "part_delta":
        return message["payload"]["id"], message["payload"]["delta"]
    return None


def _next_began(calls: list[Call], index: int) -> float:
    return calls[index + 1].began if index + 1 < len(calls) else float("inf")


def _parts_by_turn(session: str) -> list[set[str]]:
    """The parts each turn streamed, turn by turn, as the relay stored them."""
    turns: dict[str, set[str]] = {}
    for event in Event.objects.filter(stream=chat_stream(session), kind="part_delta"):
        turns.setdefault(event.payload["turn_id"], set()).add(event.payload["id"])
    return list(turns.values())


def test_relay_overhead_runs_from_opencodes_stream_to_the_browsers_socket(
    web, make_daemon, scripted_llm, opencode_server, monkeypatch
):
    make_daemon()
    scripted_llm.load(chat.script(sessions=1, rounds=1, words=WORDS))
    session = create_session(title="relay points").pk
    lines = watch_calls(monkeypatch, opencode_events, "parse_sse_line")
    frames = watch_awaited(monkeypatch, Connection, "recv")
    relays = asyncio.run(
        chat.measure(
            web.port, TOKEN, [session], opencode_server.url, opencode_server.password, rounds=1
        )
    )
    warm_up, timed = _parts_by_turn(session)
    streamed = [d for d in _with_ends(lines, _opencode_delta) if d[1] in timed]
    # Every delta OpenCode streamed in the timed round is one sample; the warm-up's are none.
    assert len(relays) == len(streamed) > 1
    assert {relay.part for relay in relays} == timed and not timed & warm_up
    relayed = _with_ends(frames, _socket_delta)
    stored = {e.seq: e for e in Event.objects.filter(stream=chat_stream(session))}
    for relay in relays:
        # Start: just after the stream's line carrying the delta was read, before the next.
        [index] = [i for i, part, end in streamed if (part, end) == (relay.part, relay.end)]
        assert lines[index].returned <= relay.direct <= _next_began(lines, index)
        # End: the first frame whose text reaches as far, just after it was read...
        index = next(i for i, part, end in relayed if part == relay.part and end >= relay.end)
        assert frames[index].returned <= relay.relayed <= _next_began(frames, index)
        # ... and that frame's event was stored by the relay before the browser had it.
        event = stored[json.loads(frames[index].result)["id"]]
        assert event.payload["id"] == relay.part
        assert event.created_at.timestamp() <= relay.relayed
        assert chat.relay_ms(relay) == pytest.approx((relay.relayed - relay.direct) * 1000)
    assert _same_text(lines, frames, timed)


def _same_text(lines: list[Call], frames: list[Call], parts: set[str]) -> bool:
    """The deltas paired are of the same text: each part reads the same on both sides."""

    def texts(calls, part_and_delta) -> dict[str, str]:
        joined: dict[str, str] = {}
        for call in calls:
            carried = part_and_delta(call.result)
            if carried is not None and carried[0] in parts:
                joined[carried[0]] = joined.get(carried[0], "") + carried[1]
        return joined

    return texts(lines, _opencode_delta) == texts(frames, _socket_delta)


def test_replay_runs_from_the_get_sent_to_its_last_line_read(web, monkeypatch):
    session = chat.stored_session(events=REPLAYED)
    clients = watch_calls(monkeypatch, httpx.Client, "__init__")
    sends = watch_calls(monkeypatch, httpx.Client, "send")
    closes = watch_calls(monkeypatch, httpx.Response, "close")
    read: list[tuple[float, str]] = []
    real_lines = httpx.Response.iter_lines

    def iter_lines(response, *args, **kwargs):
        for line in real_lines(response, *args, **kwargs):
            read.append((time.time(), line))
            yield line

    monkeypatch.setattr(httpx.Response, "iter_lines", iter_lines)
    replays = chat.replays(web.port, TOKEN, session, count=2)
    assert len(sends) == len(replays) == 2
    per_replay = len(read) // 2
    for n, (replay, send) in enumerate(zip(replays, sends, strict=True)):
        own = [(at, line) for at, line in read[n * per_replay : (n + 1) * per_replay]]
        assert replay.lines == len(own) == REPLAYED
        assert [json.loads(line)["seq"] for _, line in own] == list(range(1, REPLAYED + 1))
        # Start: just before the request went out, with no client being made in between.
        assert replay.sent <= send.began < replay.sent + 0.1
        assert not [c for c in clients if replay.sent <= c.began <= send.began]
        # End: the last stored event's line read, before the answer was closed.
        closed = next(c for c in closes if c.began >= own[-1][0])
        assert own[-1][0] <= replay.last_line <= closed.began
        assert chat.replay_ms(replay) == pytest.approx((replay.last_line - replay.sent) * 1000)
