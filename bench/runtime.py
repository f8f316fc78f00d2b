"""Agent runtime figures: spawn latency (request → worker reported STARTED) and, across
processes, event → WebSocket client latency for 10 and 50 clients.

Each spawn is read between the two instants of a Spawn, each event on each socket between
those of a Receipt (tests/integration/test_bench_viewers_points.py checks they are these)."""

import asyncio
import json
import os
import socket
import sys
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import ws_clients
from bench._report import percentile, report
from bench.harness import TOKEN, BenchSystem

SPAWNS = 60
EVENTS = 100
REPO = Path(__file__).resolve().parent.parent


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


async def ws_receipts(
    port: int, clients: int, interval: float = 0.02, events: int = EVENTS, processes: int = 1
) -> list[Receipt]:
    """Connect `clients` sockets, have an agent in a worker emit `events` stamped events
    `interval` seconds apart, and note each one's receipt on every socket (same machine, same
    clock). Raises if any socket misses an event or gets one twice.

    With `processes` > 1 the sockets are shared out among that many client processes
    (bench/ws_clients.py), as viewers each have their own browser: 1,000 sockets in one Python
    process take ~a core at 10,000 frames a second, and a frame then waits on the clients'
    own queue, not on the system the figure is about."""
    if processes > 1:
        return await _receipts_in_processes(port, clients, interval, events, processes)
    sockets = await ws_clients.connect_all(port, TOKEN, clients)
    try:
        agent_id = await asyncio.to_thread(_start_emitter, events, interval)
        rows = await ws_clients.collect_all(sockets, agent_id, events)
    finally:
        await ws_clients.close_all(sockets)
    return [Receipt(*row) for row in rows]


async def _receipts_in_processes(port, clients, interval, events, processes) -> list[Receipt]:
    shares = [clients // processes + (i < clients % processes) for i in range(processes)]
    firsts = [sum(shares[:i]) for i in range(processes)]
    children = [
        await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bench.ws_clients", str(port), str(count), str(first),
            str(events), cwd=REPO, env={**os.environ, "BENCH_WS_TOKEN": TOKEN},
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )
        for count, first in zip(shares, firsts, strict=True)
    ]  # fmt: skip
    try:
        for child in children:  # every socket connected before the first event
            if (await child.stdout.readline()).strip() != b"connected":
                raise RuntimeError("a client process could not connect its sockets")
        agent_id = await asyncio.to_thread(_start_emitter, events, interval)
        outputs = await asyncio.gather(
            *(child.communicate(f"{agent_id}\n".encode()) for child in children)
        )
    finally:
        for child in children:
            if child.returncode is None:
                child.kill()
                await child.wait()
    if any(child.returncode for child in children):
        raise RuntimeError("a client process failed: see its output above")
    return [Receipt(*row) for stdout, _ in outputs for row in json.loads(stdout)]


async def ws_latencies(
    port: int, clients: int, interval: float = 0.02, processes: int = 1
) -> list[float]:
    """emit → received, ms, for every event on every socket (ws_receipts)."""
    receipts = await ws_receipts(port, clients, interval, processes=processes)
    return [receipt_ms(receipt) for receipt in receipts]


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
