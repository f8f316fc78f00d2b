"""Chat streaming figures, with a real daphne, runagentd, the real OpenCode server and the
project's scripted model streaming (WORDS words, a chunk every CHUNK_DELAY s) in SESSIONS
chats at once:

- relay_overhead_p50_ms / _p99_ms: what AgentSys adds between the model and the browser. For
  every delta, the time it reached a browser-like WebSocket client (ws/chat/<id>/) minus the
  time the same text reached a client of OpenCode's own event stream (/global/event), so the
  model's and OpenCode's time are left out. Deltas are matched by how far into their part's
  text they end (the relay may merge deltas that arrive together: a merged one counts when it
  carries the text).
- replay_1000_events_ms: `GET /api/sessions/{id}/stream?after=0` of a session with 1,000
  stored events, request to last line.
"""

import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._report import percentile, report
from bench.harness import REPO

SESSIONS = 5
WORDS = 200  # ~40 deltas a reply (the scripted model streams a few words per chunk)
CHUNK_DELAY = 0.03
ROUNDS = 3
REPLAYED = 1000
REPLAYS = 7


@dataclass(frozen=True)
class Relay:
    """One delta's two instants (time.time())."""

    part: str
    end: int  # how far into its part's text the delta ends
    direct: float  # its line of OpenCode's /global/event read by a client of that stream
    relayed: float  # the WebSocket frame carrying its text (maybe merged) read by the browser


def relay_ms(relay: Relay) -> float:
    return (relay.relayed - relay.direct) * 1000


@dataclass(frozen=True)
class Replay:
    """One replay's instants (time.time()) and what it read."""

    sent: float  # the GET about to be sent
    last_line: float  # the last line of its answer read
    lines: int


def replay_ms(replay: Replay) -> float:
    return (replay.last_line - replay.sent) * 1000


def script(sessions: int = SESSIONS, rounds: int = ROUNDS, words: int = WORDS) -> dict:
    text = " ".join(f"w{i:03d}" for i in range(words))
    turn = {"match": "chat-auto", "steps": [{"chunk_delay": CHUNK_DELAY}, {"text": text}]}
    return {"turns": [turn] * (sessions * (rounds + 1))}


def _arrived(arrivals: dict, part: str, delta: str) -> None:
    """(end offset, time.time()) of a delta, in its part's list of `arrivals`."""
    of_part = arrivals.setdefault(part, [])
    end = (of_part[-1][0] if of_part else 0) + len(delta)
    of_part.append((end, time.time()))


async def opencode_deltas(url: str, password: str, seen: dict, ready: asyncio.Event):
    """(part id → [(end offset, arrival)]) from OpenCode's own event stream."""
    import httpx

    from agentsys.opencode.events import parse_sse_line

    async with (
        httpx.AsyncClient(
            auth=("opencode", password), timeout=httpx.Timeout(10, read=None)
        ) as client,
        client.stream("GET", f"{url}/global/event") as stream,
    ):
        ready.set()
        async for line in stream.aiter_lines():
            event = parse_sse_line(line)
            if event and event.get("type") == "message.part.delta":
                props = event["properties"]
                _arrived(seen, props["partID"], props["delta"])


async def one_chat(port: int, token: str, session_id: str, seen: dict) -> None:
    import httpx
    from websockets.asyncio.client import connect

    headers = {"X-Auth-Token": token}
    async with (
        connect(
            f"ws://127.0.0.1:{port}/ws/chat/{session_id}/",
            additional_headers={**headers, "Origin": "http://127.0.0.1"},
        ) as socket,
        httpx.AsyncClient(timeout=120) as client,
    ):
        body = {"session_id": session_id, "message": "stream please", "mode": "auto"}
        async with client.stream(
            "POST", f"http://127.0.0.1:{port}/api/chat", json=body, headers=headers
        ) as response:
            assert response.status_code == 200, await response.aread()
            async for message in socket:
                event = json.loads(message)
                payload = event["payload"]
                if event["kind"] == "part_delta":
                    _arrived(seen, payload["id"], payload["delta"])
                if event["kind"] == "session_status":
                    break
            await response.aread()


def relays(direct: dict, relayed: dict) -> list[Relay]:
    """Each delta OpenCode streamed, paired with the first relayed one that carries its end."""
    samples = []
    for part, arrivals in direct.items():
        through = relayed.get(part)
        if not through:
            continue
        for end, at in arrivals:
            reached = next((t for e, t in through if e >= end), None)
            if reached is not None:
                samples.append(Relay(part, end, at, reached))
    return samples


async def measure(
    port: int,
    token: str,
    session_ids: list[str],
    oc_url: str,
    password: str,
    rounds: int = ROUNDS,
) -> list[Relay]:
    direct, relayed = {}, {}
    ready = asyncio.Event()
    reader = asyncio.create_task(opencode_deltas(oc_url, password, direct, ready))
    await ready.wait()
    # A first round warms up what each session sets up once (its L1 agent and OpenCode
    # session); the figures are the steady state of the rounds after it.
    await asyncio.gather(*(one_chat(port, token, s, {}) for s in session_ids))
    direct.clear()
    for _ in range(rounds):
        await asyncio.gather(*(one_chat(port, token, s, relayed) for s in session_ids))
    reader.cancel()
    return relays(direct, relayed)


def stored_session(events: int = REPLAYED) -> str:
    """A chat session with `events` stored deltas (none of them published)."""
    from events_app.events import chat_stream, record_event
    from sessions_app.services import create_session

    session = create_session(title="bench replay")
    for n in range(events):
        record_event(
            stream=chat_stream(session.pk),
            kind="part_delta",
            payload={"turn_id": "t", "id": "p", "ptype": "text", "delta": f"token {n} "},
            publish_live=False,
        )
    return session.pk


def replays(port: int, token: str, session_id: str, count: int = REPLAYS) -> list[Replay]:
    """`count` replays of the session's stream, one after the other, by a client made before
    the first: building one (its SSL context, ~20 ms) is the client's, not the replay's."""
    import httpx

    samples = []
    headers = {"X-Auth-Token": token}
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=60) as client:
        for _ in range(count):
            lines, last_line = 0, 0.0
            sent = time.time()
            with client.stream("GET", f"/api/sessions/{session_id}/stream?after=0") as response:
                for line in response.iter_lines():
                    if line.strip():
                        lines, last_line = lines + 1, time.time()
            samples.append(Replay(sent, last_line, lines))
    return samples


def main() -> None:
    from agentsys.opencode.server import LocalOpenCode, provider_config
    from agentsys.scripted_llm import ScriptedLLM

    root = Path(tempfile.mkdtemp(prefix="agentsys-bench-chat-"))
    work = root / "work"
    shutil.copytree(REPO / "researchagent" / "demo_workspace", work)
    llm = ScriptedLLM(script())
    llm.serve_in_thread()
    opencode = LocalOpenCode(
        state_dir=root / "opencode",
        workdir=work,
        config=provider_config(
            provider="demo", model="demo-research", demo_base_url=llm.base_url + "/v1"
        ),
    )
    opencode.start()
    os.environ.update(
        OPENCODE_URL=opencode.url,
        OPENCODE_SERVER_PASSWORD=opencode.password,
        MODEL_PROVIDER="demo",
        MODEL_ID="demo-research",
        AGENTSYS_WORKDIR=str(work),
    )
    from bench.harness import TOKEN, BenchSystem
    from tests.helpers import free_port

    system = BenchSystem(port=free_port())
    try:
        system.start_daemon()
        system.start_web()
        from sessions_app.services import create_session

        sessions = [create_session(title=f"bench {n}").pk for n in range(SESSIONS)]
        measured = asyncio.run(
            measure(system.port, TOKEN, sessions, opencode.url, opencode.password)
        )
        samples = [relay_ms(relay) for relay in measured]
        if len(samples) < SESSIONS * ROUNDS * 5:
            raise RuntimeError(f"only {len(samples)} deltas matched")
        print(f"({len(samples)} deltas in {SESSIONS} concurrent chats x {ROUNDS} rounds)")
        report("relay_overhead_p50_ms", percentile(samples, 50), "ms")
        report("relay_overhead_p99_ms", percentile(samples, 99), "ms")
        replayed = replays(system.port, TOKEN, stored_session())
        assert all(replay.lines == REPLAYED for replay in replayed), replayed
        report("replay_1000_events_ms", percentile([replay_ms(r) for r in replayed], 50), "ms")
    finally:
        system.close()
        opencode.stop()
        llm.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
