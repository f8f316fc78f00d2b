"""How fast wait_runs wakes (issue 39 §3), on the web's side of it (scheduler_app.run_waits,
what POST /api/runs/wait awaits; the HTTP and MCP hops on top are the same as any call's):

- wake_latency_p50_ms: a metric row stored (record_rows called, in a thread of its own, as
  runagentd stores them; its commit sends the NOTIFY) → the waiting coroutine running again,
  one waiter; goal ≤ 200 ms;
- waiters_1000_rss_growth_mb: what 1,000 waits on one sweep (10 runs) add to the process's
  resident memory once all of them wait, first reads and answers included (the most of three
  rounds); goal ≤ 50;
- wake_latency_1000_waiters_p50_ms: the row stored → each of those 1,000 running again (one
  read wakes them all); goal ≤ 200 ms.

`measure()` returns the figures; `main()` prints them (`python bench/stop_rules.py wake`)."""

from __future__ import annotations

import asyncio
import gc
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._report import percentile, report
from bench.harness import BenchSystem

SAMPLES = 30
WAITERS = 1000
RUNS = 10
ROUNDS = 3
BELOW = {"metric": "loss", "below": 0.5}


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _store(run_id: str, loss: float, step: int) -> float:
    """A row stored and committed, as runagentd stores one; returns when the call began."""
    from django.db import connections

    from scheduler_app.metrics.series import record_rows

    began = time.perf_counter()
    record_rows(agent_id=f"executor-{run_id}", run_id=run_id, rows=[{"step": step, "loss": loss}])
    connections.close_all()  # the thread ends; so does its connection
    return began


async def _woken_after(waits: list[asyncio.Task], run_id: str, step: int) -> list[float]:
    """Store a crossing row for `run_id` once `waits` all wait; each wait's ms from the store
    to its coroutine running again."""
    from scheduler_app.run_waits import on_reads_thread, waiters

    while waiters().waiting < len(waits):
        await asyncio.sleep(0.01)
    await on_reads_thread(lambda: None)  # behind every first read: all of them wait now
    await asyncio.sleep(0.05)
    resumed: list[float] = []
    for wait in waits:
        wait.add_done_callback(lambda _w: resumed.append(time.perf_counter()))
    began = await asyncio.to_thread(_store, run_id, 0.1, step)
    answers = await asyncio.gather(*waits)
    assert all(a["woke"] and a["run_id"] == run_id for a in answers), answers[0]
    await asyncio.to_thread(_store, run_id, 1.0, step + 1)  # back above for the next round
    return [(at - began) * 1000 for at in resumed]


def _wait(**target) -> asyncio.Task:
    from agentsys.run_waits import parse_until
    from scheduler_app.run_waits import wait_runs

    conditions = parse_until(BELOW)
    return asyncio.ensure_future(wait_runs(conditions=conditions, timeout_s=60, **target))


async def _one_waiter(run_id: str) -> list[float]:
    timings = []
    for i in range(SAMPLES):
        await asyncio.sleep(0.02)  # the row of the last round is behind us
        timings += await _woken_after([_wait(run_ids=[run_id], sweep_id="")], run_id, 10 * i)
    return timings


async def _many_waiters(sweep_id: str, run_id: str) -> tuple[float, list[float]]:
    from scheduler_app.run_waits import on_reads_thread, waiters

    growth, timings = 0.0, []
    for i in range(ROUNDS):
        gc.collect()
        before = _rss_mb()
        waits = [_wait(run_ids=[], sweep_id=sweep_id) for _ in range(WAITERS)]
        while waiters().waiting < WAITERS:
            await asyncio.sleep(0.01)
        await on_reads_thread(lambda: None)
        gc.collect()
        # The first round counts: the one-waiter rounds warmed the code paths up already,
        # and later rounds reuse the memory the first one's waits gave back.
        growth = max(growth, _rss_mb() - before)
        timings += await _woken_after(waits, run_id, 1000 + 10 * i)
    return growth, timings


def measure() -> dict[str, float]:
    from scheduler_app.models import Run, Sweep

    sweep = Sweep.objects.create(name="wake bench")
    runs = [
        Run.objects.create(name=f"r{i}", command="true", status="running", sweep=sweep)
        for i in range(RUNS)
    ]
    for run in runs:
        _store(run.pk, 1.0, 0)

    async def go():
        one = await _one_waiter(runs[0].pk)
        growth, many = await _many_waiters(sweep.pk, runs[3].pk)
        return one, growth, many

    one, growth, many = asyncio.run(go())
    from scheduler_app.run_waits import close_reads_connection

    close_reads_connection()
    return {
        "wake_latency_p50_ms": percentile(one, 50),
        "waiters_1000_rss_growth_mb": growth,
        "wake_latency_1000_waiters_p50_ms": percentile(many, 50),
    }


def main() -> None:
    BenchSystem()
    figures = measure()
    for name, value in figures.items():
        report(name, value, "MB" if name.endswith("_mb") else "ms")
