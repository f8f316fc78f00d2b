"""Placement at a lab's scale (issue 40 §1): 64 hosts of 8 GPUs, 10^5 queued runs of 1, 2, 4
and 8 GPUs with heavy-tailed durations, two people, one submitting 90 % of them.

Simulated time, real decisions: every claim is the product's own policy (agentsys.backfill,
agentsys.scheduling) choosing from the head of the queue and the host's free GPUs, as
runagentd's claim does (a first window of 64 requests, 500 when that leaves GPUs idle). Each
run's time limit (its wall_seconds stop rule) is its true duration times 1.2 to 3, as people
overestimate; it ends at its true duration. When a run ends, its host claims, then every host
with free GPUs (the NOTIFY wakes every runagentd).

Prints, with the strict FIFO baseline (`reserve`: nothing passes the head) from the same
runs in the same run of this script:
- backfill_gpu_utilisation: busy GPU time over all GPU time while runs wait (≥ 0.95).
- largest_run_wait_vs_fifo: the 8-GPU runs' mean wait under backfill over under FIFO (≤ 2).
- small_person_wait_ratio: the small person's median wait over the big person's (≤ 0.1).
Also fifo_gpu_utilisation and first_fit_* for comparison.
"""

from __future__ import annotations

import heapq
import math
import random
import statistics
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agentsys.backfill import Backfill, Busy, ClaimContext, HostState
from agentsys.scheduling import FifoFirstFit, HeadReservation, QueuedRequest
from bench._report import report

HOSTS, GPUS_PER_HOST = 64, 8
RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
SIZES, SIZE_WEIGHTS = (1, 2, 4, 8), (0.5, 0.25, 0.15, 0.10)
BIG_SHARE_OF_RUNS = 0.9
FIRST_WINDOW, CLAIM_WINDOW = 64, 500  # scheduler_app.queue.claims


@dataclass
class SimRun:
    id: str
    person: str
    gpus: int
    duration: float
    limit: float
    seq: int
    started: float | None = None


def make_runs(seed: int = 1) -> list[SimRun]:
    """Lognormal durations (median 15 min, a tail to days); submission order interleaves the
    two people at random, 90/10."""
    rng = random.Random(seed)
    runs = []
    for n in range(RUNS):
        gpus = rng.choices(SIZES, SIZE_WEIGHTS)[0]
        duration = min(7 * 86400.0, math.exp(rng.gauss(math.log(900), 1.3)))
        limit = math.ceil(duration * rng.uniform(1.2, 3.0))
        person = "big" if rng.random() < BIG_SHARE_OF_RUNS else "small"
        runs.append(SimRun(f"r{n}", person, gpus, duration, limit, n))
    return runs


@dataclass
class Cluster:
    """The simulated hosts: free GPU indices and what runs on each."""

    free: list[list[int]] = field(
        default_factory=lambda: [list(range(GPUS_PER_HOST)) for _ in range(HOSTS)]
    )
    running: list[dict[str, tuple[SimRun, tuple[int, ...]]]] = field(
        default_factory=lambda: [{} for _ in range(HOSTS)]
    )

    def states(self) -> list[HostState]:
        return [
            HostState(
                id=h,
                name=f"gpu-{h}",
                total=GPUS_PER_HOST,
                free=len(self.free[h]),
                busy=tuple(Busy(run.gpus, run.started + run.limit) for run, _ in r.values()),
            )
            for h, r in enumerate(self.running)
        ]


class Queue:
    """Queued runs in arrival order; `window(size)` the oldest not yet started."""

    def __init__(self, runs: list[SimRun]):
        self.waiting = deque(runs)
        self.started: set[str] = set()

    def __bool__(self) -> bool:
        self._drop_started()
        return bool(self.waiting)

    def _drop_started(self) -> None:
        while self.waiting and self.waiting[0].id in self.started:
            self.waiting.popleft()

    def window(self, size: int) -> list[SimRun]:
        self._drop_started()
        out = []
        for run in self.waiting:
            if run.id not in self.started:
                out.append(run)
                if len(out) == size:
                    break
        return out


def simulate(policy, runs: list[SimRun]) -> dict:
    for run in runs:
        run.started = None
    cluster, queue, by_id = Cluster(), Queue(list(runs)), {run.id: run for run in runs}
    ends: list[tuple[float, int, str]] = []
    now, busy_gpu_seconds, last, waiting_until = 0.0, 0.0, 0.0, 0.0
    busy_gpus = 0

    def claim(host: int) -> None:
        nonlocal busy_gpus
        free = cluster.free[host]
        if not free or not queue:
            return
        context = ClaimContext(host, now, cluster.states)
        window = queue.window(FIRST_WINDOW)
        placements = policy.select(_asks(window), list(free), GPUS_PER_HOST, context)
        if len(window) == FIRST_WINDOW and sum(len(p.gpu_indices) for p in placements) < len(free):
            window = queue.window(CLAIM_WINDOW)
            placements = policy.select(_asks(window), list(free), GPUS_PER_HOST, context)
        for placement in placements:
            run = by_id[placement.request_id]
            run.started = now
            queue.started.add(run.id)
            for index in placement.gpu_indices:
                free.remove(index)
            cluster.running[host][run.id] = (run, placement.gpu_indices)
            busy_gpus += run.gpus
            heapq.heappush(ends, (now + run.duration, host, run.id))

    for host in range(HOSTS):
        claim(host)
    while ends:
        at, host, run_id = heapq.heappop(ends)
        if queue:  # GPU time counts while runs wait
            busy_gpu_seconds += busy_gpus * (at - last)
            waiting_until = at
        last, now = at, at
        run, indices = cluster.running[host].pop(run_id)
        cluster.free[host].extend(indices)
        busy_gpus -= run.gpus
        claim(host)
        for other in range(HOSTS):
            if other != host and cluster.free[other]:
                claim(other)
    waits = {run.id: run.started for run in runs}
    return {
        "utilisation": busy_gpu_seconds / (HOSTS * GPUS_PER_HOST * waiting_until),
        "largest_mean_wait": statistics.mean(waits[r.id] for r in runs if r.gpus == max(SIZES)),
        "median_wait": {
            person: statistics.median(waits[r.id] for r in runs if r.person == person)
            for person in ("big", "small")
        },
    }


def _asks(window: list[SimRun]) -> list[QueuedRequest]:
    return [QueuedRequest(run.id, run.gpus, {}, run.limit) for run in window]


def main() -> None:
    runs = make_runs()
    results = {}
    for name, policy in (
        ("fifo", HeadReservation()),
        ("first_fit", FifoFirstFit()),
        ("backfill", Backfill()),
    ):
        started = time.perf_counter()
        results[name] = simulate(policy, runs)
        print(f"# {name}: simulated in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    backfill, fifo, first_fit = results["backfill"], results["fifo"], results["first_fit"]
    report("backfill_gpu_utilisation", backfill["utilisation"], "ratio")
    report("fifo_gpu_utilisation", fifo["utilisation"], "ratio")
    report("first_fit_gpu_utilisation", first_fit["utilisation"], "ratio")
    report(
        "largest_run_wait_vs_fifo",
        backfill["largest_mean_wait"] / fifo["largest_mean_wait"],
        "ratio",
    )
    report(
        "first_fit_largest_run_wait_vs_fifo",
        first_fit["largest_mean_wait"] / fifo["largest_mean_wait"],
        "ratio",
    )
    report(
        "small_person_wait_ratio",
        backfill["median_wait"]["small"] / backfill["median_wait"]["big"],
        "ratio",
    )


if __name__ == "__main__":
    main()
