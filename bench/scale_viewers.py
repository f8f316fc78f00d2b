"""Viewers at a lab's scale (issue 40 §2): 200 and 1,000 WebSocket clients on the live agent
feed (what the agent tree and the run pages follow), against the web as `make run` starts it
and a runagentd whose worker emits the events.

- ws_200_clients_p99_ms: 200 sockets, 100 events 100 ms apart (10 a second, as a run's
  metrics come; 2,000 frames a second in all): emit in the worker → received by the client,
  p99 (goal ≤ 50). ws_200_clients_50_per_s_p99_ms: the same at 50 events a second (10,000
  frames a second), the rate bench/runtime.py's 10- and 50-client figures use.
- ws_1000_clients_p99_ms: 1,000 sockets, 10 events a second (10,000 frames a second in all),
  p99 (goal ≤ 250). Every socket must get every event once (bench.runtime.ws_latencies
  raises otherwise): nothing dropped.

The clients run in two processes of their own (CLIENT_PROCESSES) on the same 2 cores as the
web, the daemon and PostgreSQL, so the figures include the clients' own queueing. Until
2026-12-06 they ran in this one process: at 1,000 sockets it was busy the whole time (py-spy),
and a frame waited there for its turn, not in the system being measured.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._report import percentile, report
from bench.harness import BenchSystem
from bench.runtime import ws_latencies
from bench.ui import free_port

CASES = (("ws_200_clients", 200, 0.1), ("ws_200_clients_50_per_s", 200, 0.02))
CASES += (("ws_1000_clients", 1000, 0.1),)
CLIENT_PROCESSES = 2  # the sockets shared out among them (bench.runtime.ws_receipts says why)


def viewers() -> None:
    port = free_port()
    system = BenchSystem(port=port)
    try:
        system.start_daemon()
        system.start_web()
        asyncio.run(ws_latencies(port, 2))  # warm-up: first fork, first connections
        for name, clients, interval in CASES:
            samples = asyncio.run(ws_latencies(port, clients, interval, CLIENT_PROCESSES))
            report(f"{name}_p50_ms", percentile(samples, 50), "ms")
            report(f"{name}_p99_ms", percentile(samples, 99), "ms")
    finally:
        system.close()
