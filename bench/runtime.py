"""Agent runtime figures: spawn latency (request → worker reported STARTED) and, across
processes, event → WebSocket client latency for 10 and 50 clients.

Each spawn is read between the two instants of a Spawn, each event on each socket between
those of a Receipt (tests/integration/test_bench_viewers_points.py checks they are these)."""

import asyncio
import json
import socket
import sys
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._report import percentile, report
from bench.harness import TOKEN, BenchSystem

SPAWNS = 60
EVENTS = 100


@dataclass(frozen=True)
class Spawn:
    """One agent's two instants, as the product wrote them."""

    agent_id: str
    requested: datetime  # its row's created_at, written by request_agent_start
    started: datetime  # its "started" event's: runagentd recording its worker's STARTED


def spawn_ready_ms(spawn: Spawn) -> float:
    return (spawn.started - spawn.requested).total_seconds() * 1000


def spawns(count: int = SPAWNS) -> list[Spawn]:
    """`count` Quick agents requested one after the other, each once its worker started."""
    from agents_app.models import Agent
    from agents_app.services import request_agent_start
    from events_app.models import Event

    found = []
    for _ in range(count):
        agent = request_agent_start(cls_path="bench.agents.Quick", goal="bench", project="bench")
        deadline = time.monotonic() + 30
        while not (started := Event.objects.filter(agent_id=agent.id, kind="started").first()):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{agent.id} never started")
            time.sleep(0.005)
        created = Agent.objects.values_list("created_at", flat=True).get(pk=agent.id)
        found.append(Spawn(agent.id, created, started.created_at))
    return found


@dataclass(frozen=True)
class Receipt:
    """One event on one socket: its two instants (time.time(), one machine's clock)."""

    client: int  # which of the sockets
    seq: int  # the event's id on the feed
    index: int  # its number in the emitter's count
    emitted: float  # the emitter's clock as it called emit_event (the payload's "t")
    received: float  # the frame read off this socket


def receipt_ms(receipt: Receipt) -> float:
    return (receipt.received - receipt.emitted) * 1000


def _start_emitter(events: int, interval: float) -> str:
    from django.db import connections

    from agents_app.services import request_agent_start

    config = {"count": events, "interval": interval, "delay": 0.5}
    agent = request_agent_start(
        cls_path="bench.agents.Emitter", goal="bench", project="bench", config=config
    )
    connections.close_all()  # the thread ends; so does its connection
    return agent.id


async def _collect(ws, client: int, agent_id: str, events: int) -> list[Receipt]:
    # Plain tuples while the frames come, Receipts after: the clients' own garbage collections
    # pause them, and objects it tracks (10^5 Receipts at 1,000 clients) make those longer.
    seen = []
    while len(seen) < events:
        text = await asyncio.wait_for(ws.recv(), 30)
        received = time.time()
        frame = json.loads(text)
        if frame["kind"] == "bench" and frame["agent_id"] == agent_id:
            payload = frame["payload"]
            seen.append((frame["id"], payload["i"], payload["t"], received))
    receipts = [Receipt(client, *row) for row in seen]
    if sorted(receipt.index for receipt in receipts) != list(range(events)):
        raise RuntimeError(f"socket {client} did not get each of the {events} events once")
    return receipts


async def ws_receipts(
    port: int, clients: int, interval: float = 0.02, events: int = EVENTS
) -> list[Receipt]:
    """Connect `clients` sockets, have an agent in a worker emit `events` stamped events
    `interval` seconds apart, and note each one's receipt on every socket (same machine, same
    clock). Raises if any socket misses an event or gets one twice."""
    from websockets.asyncio.client import connect

    url = f"ws://127.0.0.1:{port}/ws/agents/events/"
    sockets = [
        await connect(
            url,
            additional_headers={"X-Auth-Token": TOKEN},
            origin=f"http://127.0.0.1:{port}",
            max_queue=None,
        )
        for _ in range(clients)
    ]
    try:
        agent_id = await asyncio.to_thread(_start_emitter, events, interval)
        results = await asyncio.gather(
            *(_collect(ws, i, agent_id, events) for i, ws in enumerate(sockets))
        )
    finally:
        for ws in sockets:
            await ws.close()
    return [receipt for receipts in results for receipt in receipts]


async def ws_latencies(port: int, clients: int, interval: float = 0.02) -> list[float]:
    """emit → received, ms, for every event on every socket (ws_receipts)."""
    return [receipt_ms(receipt) for receipt in await ws_receipts(port, clients, interval)]


def main() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    system = BenchSystem(port=port)
    try:
        system.start_daemon()
        spawns(5)  # warm-up: first forks, first connections
        samples = [spawn_ready_ms(spawn) for spawn in spawns()]
        report("spawn_ready_p50_ms", percentile(samples, 50), "ms")
        report("spawn_ready_p99_ms", percentile(samples, 99), "ms")
        system.start_web()
        asyncio.run(ws_latencies(port, 2))  # warm-up
        for clients in (10, 50):
            samples = asyncio.run(ws_latencies(port, clients))
            report(f"event_to_ws_p50_ms_{clients}_clients", percentile(samples, 50), "ms")
            report(f"event_to_ws_p99_ms_{clients}_clients", percentile(samples, 99), "ms")
    finally:
        system.close()


if __name__ == "__main__":
    main()
