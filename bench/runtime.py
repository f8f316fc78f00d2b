"""Agent runtime figures: spawn latency (request → worker reported STARTED) and, across
processes, event → WebSocket client latency for 10 and 50 clients."""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._report import percentile, report
from bench.harness import BenchSystem

SPAWNS = 60


def spawn_latencies() -> list[float]:
    from agents_app.models import Agent, Event
    from agents_app.services import request_agent_start

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


def main() -> None:
    system = BenchSystem()
    try:
        system.start_daemon()
        spawn_latencies()[:5]  # warm-up: first forks, first connections
        samples = spawn_latencies()
        report("spawn_ready_p50_ms", percentile(samples, 50), "ms")
        report("spawn_ready_p99_ms", percentile(samples, 99), "ms")
    finally:
        system.close()


if __name__ == "__main__":
    main()
