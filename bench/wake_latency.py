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

Each wake is read between the two instants of a Wake (time.time(), so that they compare with
the calls a test watches: tests/integration/test_bench_wake_points.py). `measure()` returns
the figures; `main()` prints them (`python bench/stop_rules.py wake`)."""

from __future__ import annotations

import asyncio
import gc
import sys
import time
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Wake:
    """One waiter's two instants (time.time())."""

    stored: float  # record_rows called with the row that meets its condition
    resumed: float  # its coroutine running again: the wait done, its answer made


def wake_ms(wake: Wake) -> float:
    return (wake.resumed - wake.stored) * 1000


def _store(run_id: str, loss: float, step: int) -> float:
    """A row stored and committed, as runagentd stores one; returns when the call began."""
    from django.db import connections

    from scheduler_app.metrics.series import record_rows

    began = time.time()
    record_rows(agent_id=f"executor-{run_id}", run_id=run_id, rows=[{"step": step, "loss": loss}])
    connections.close_all()  # the thread ends; so does its connection
    return began


async def _woken_after(waits: list[asyncio.Task], run_id: str, step: int) -> list[Wake]:
    """Store a crossing row for `run_id` once `waits` all wait; each wait's instants."""
    from scheduler_app.run_waits import on_reads_thread, waiters

    while waiters().waiting < len(waits):
        await asyncio.sleep(0.01)
    await on_reads_thread(lambda: None)  # behind every first read: all of them wait now
    await asyncio.sleep(0.05)
    resumed: list[float] = []
    for wait in waits:
        wait.add_done_callback(lambda _w: resumed.append(time.time()))
    stored = await asyncio.to_thread(_store, run_id, 0.1, step)
    answers = await asyncio.gather(*waits)
    assert all(a["woke"] and a["run_id"] == run_id for a in answers), answers[0]
    await asyncio.to_thread(_store, run_id, 1.0, step + 1)  # back above for the next round
    return [Wake(stored, at) for at in resumed]


def _wait(**target) -> asyncio.Task:
    from agentsys.run_waits import parse_until
    from scheduler_app.run_waits import wait_runs

    conditions = parse_until(BELOW)
    return asyncio.ensure_future(wait_runs(conditions=conditions, timeout_s=60, **target))


async def one_waiter(run_id: str, samples: int = SAMPLES) -> list[Wake]:
    wakes = []
    for i in range(samples):
        await asyncio.sleep(0.02)  # the row of the last round is behind us
        wakes += await _woken_after([_wait(run_ids=[run_id], sweep_id="")], run_id, 10 * i)
    return wakes


async def many_waiters(
    sweep_id: str, run_id: str, count: int = WAITERS, rounds: int = ROUNDS
) -> tuple[float, list[Wake]]:
    """`count` waits on the sweep, `rounds` times: the most the process's memory grew from
    before they were made to all of them waiting (MB), and their wakes."""
    from scheduler_app.run_waits import on_reads_thread, waiters

    growth, wakes = 0.0, []
    for i in range(rounds):
        gc.collect()
        before = _rss_mb()
        waits = [_wait(run_ids=[], sweep_id=sweep_id) for _ in range(count)]
        while waiters().waiting < count:
            await asyncio.sleep(0.01)
        await on_reads_thread(lambda: None)
        gc.collect()
        # The first round counts: the one-waiter rounds warmed the code paths up already,
        # and later rounds reuse the memory the first one's waits gave back.
        growth = max(growth, _rss_mb() - before)
        wakes += await _woken_after(waits, run_id, 1000 + 10 * i)
    return growth, wakes


def sweep_of_runs(count: int = RUNS) -> tuple[str, list[str]]:
    """A sweep of `count` running runs, each with a row above the conditions' threshold."""
    from scheduler_app.models import Run, Sweep

    sweep = Sweep.objects.create(name="wake bench")
    runs = [
        Run.objects.create(name=f"r{i}", command="true", status="running", sweep=sweep)
        for i in range(count)
    ]
    for run in runs:
        _store(run.pk, 1.0, 0)
    return sweep.pk, [run.pk for run in runs]


def measure() -> dict[str, float]:
    sweep_id, run_ids = sweep_of_runs()

    async def go():
        one = await one_waiter(run_ids[0])
        growth, many = await many_waiters(sweep_id, run_ids[3])
        return one, growth, many

    one, growth, many = asyncio.run(go())
    from scheduler_app.run_waits import close_reads_connection

    close_reads_connection()
    return {
        "wake_latency_p50_ms": percentile([wake_ms(w) for w in one], 50),
        "waiters_1000_rss_growth_mb": growth,
        "wake_latency_1000_waiters_p50_ms": percentile([wake_ms(w) for w in many], 50),
    }


def main() -> None:
    BenchSystem()
    figures = measure()
    for name, value in figures.items():
        report(name, value, "MB" if name.endswith("_mb") else "ms")
