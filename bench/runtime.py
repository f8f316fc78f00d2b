"""Agent runtime figures: spawn latency (request → worker reported STARTED) and, across
processes, event → WebSocket client latency for 10 and 50 clients."""

import asyncio
import json
import socket
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._report import percentile, report
from bench.harness import TOKEN, BenchSystem

SPAWNS = 60
EVENTS = 100


def spawn_latencies() -> list[float]:
    from agents_app.models import Agent
    from agents_app.services import request_agent_start
    from events_app.models import Event

    latencies = []
    for _ in range(SPAWNS):
        agent = request_agent_start(cls_path="bench.agents.Quick", goal="bench", project="bench")
        deadline = time.monotonic() + 30
        while not (started := Event.objects.filter(agent_id=agent.id, kind="started").first()):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{agent.id} never started")
            time.sleep(0.005)
        created = Agent.objects.values_list("created_at", flat=True).get(pk=agent.id)
        latencies.append((started.created_at - created).total_seconds() * 1000)
    return latencies


async def ws_latencies(port: int, clients: int, interval: float = 0.02) -> list[float]:
    """Connect `clients` sockets, have an agent in a worker emit EVENTS stamped events
    `interval` seconds apart, and measure emit → received on every socket (same machine, same
    clock). Raises if any socket misses an event or gets one twice."""
    from websockets.asyncio.client import connect

    from agents_app.services import request_agent_start

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

    async def collect(ws) -> list[float]:
        samples, seen = [], set()
        while len(samples) < EVENTS:
            frame = json.loads(await asyncio.wait_for(ws.recv(), 30))
            if frame["kind"] == "bench":
                samples.append((time.time() - frame["payload"]["t"]) * 1000)
                seen.add(frame["payload"]["i"])
        if seen != set(range(EVENTS)):
            raise RuntimeError(f"a socket got {len(seen)} distinct events of {EVENTS}")
        return samples

    try:
        await asyncio.to_thread(
            request_agent_start,
            cls_path="bench.agents.Emitter",
            goal="bench",
            project="bench",
            config={"count": EVENTS, "interval": interval, "delay": 0.5},
        )
        results = await asyncio.gather(*(collect(ws) for ws in sockets))
    finally:
        for ws in sockets:
            await ws.close()
    return [sample for samples in results for sample in samples]


def main() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    system = BenchSystem(port=port)
    try:
        system.start_daemon()
        spawn_latencies()[:5]  # warm-up: first forks, first connections
        samples = spawn_latencies()
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
