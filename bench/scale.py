"""Placement at a lab's scale (issue 40 §1): 64 hosts of 8 GPUs, 10^5 queued runs of 1, 2, 4
and 8 GPUs with heavy-tailed durations, two people, one submitting 90 % of them.

Simulated time, real decisions: every claim is the product's own policy (agentsys.backfill,
agentsys.scheduling) choosing from the head of the queue and the host's free GPUs, as
runagentd's claim does (a first window of 64 requests, 500 when that leaves GPUs idle). Each
run's time limit (its wall_seconds stop rule) is its true duration times 1.2 to 3, as people
overestimate; it ends at its true duration. When a run ends, its host claims, then, if that
started something, every host with free GPUs (the NOTIFY wakes every runagentd; a host whose
GPUs and queue did not change would decide the same). A submission wakes every host.

Prints, with the strict FIFO baseline (`reserve`: nothing passes the head) from the same
runs in the same run of this script:
- backfill_gpu_utilisation: busy GPU time over all GPU time while runs wait (≥ 0.95).
- largest_run_wait_vs_fifo: the 8-GPU runs' mean wait under backfill over under FIFO (≤ 2).
- small_person_wait_ratio: the small person's median wait over the big person's (≤ 0.1),
  with equal shares (fair share weighs each person's turn by what they ask for in all).
  small_person_wait_ratio_small_first: the same with the small person's share at its most
  (AGENTSYS_QUEUE_SHARES=small=1000000): the least any share setting gives.
Also fifo_gpu_utilisation and first_fit_* for comparison. The backfill run takes the queue in
fair-share turns between the two people (agentsys.fair_share), as the product does; FIFO and
first fit in arrival order. Every run is queued at the start; the `*_arrivals` figures (on a
tenth as many runs) have the small person submit one run at a time, evenly over the time the
work takes, while the big person's sweep waits.

And, on a real PostgreSQL: claims_per_s_64_hosts (≥ 2000), 64 host claimers at once, each
round from all GPUs free to every host full; run_ends_per_s_64_hosts, the same runs ended
between rounds, every host at once (timed apart, as the in-process figures do). Then
the viewers' figures (bench/scale_viewers.py: ws_200_clients_p99_ms, ws_1000_clients_p99_ms)
and the stored history's (bench/scale_history.py: context_p95_ms_1e7,
sweep_table_api_100000_runs_ms, runs_list_1e6_ms, event_replay_1e7_p99_ms and more), each on
a throw-away AgentSys of its own.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
import random
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agentsys.backfill import Backfill, Busy, ClaimContext, HostState
from agentsys.fair_share import MAX_SHARE, fair_order
from agentsys.scheduling import (
    CLAIM_WINDOW,
    FIRST_WINDOW,
    FifoFirstFit,
    HeadReservation,
    QueuedRequest,
)
from bench._report import report

HOSTS, GPUS_PER_HOST = 64, 8
RUNS = 100_000
SIZES, SIZE_WEIGHTS = (1, 2, 4, 8), (0.5, 0.25, 0.15, 0.10)
BIG_SHARE_OF_RUNS = 0.9


@dataclass
class SimRun:
    id: str
    person: str
    gpus: int
    duration: float
    limit: float
    seq: int
    arrives: float = 0.0  # when it is submitted
    started: float | None = None
    ask: QueuedRequest | None = None  # as a claim reads it

    def __post_init__(self):
        self.ask = QueuedRequest(self.id, self.gpus, {}, self.limit)


def make_runs(count: int, *, seed: int = 1, spread: bool = True) -> list[SimRun]:
    """Lognormal durations (median 15 min, a tail to days); 90 % of the runs are the big
    person's sweep, submitted at once. The small person's runs come one at a time, evenly over
    the time the cluster needs for all the work (`spread`), or all at once too."""
    rng = random.Random(seed)
    runs = []
    for n in range(count):
        gpus = rng.choices(SIZES, SIZE_WEIGHTS)[0]
        duration = min(7 * 86400.0, math.exp(rng.gauss(math.log(900), 1.3)))
        limit = math.ceil(duration * rng.uniform(1.2, 3.0))
        person = "big" if rng.random() < BIG_SHARE_OF_RUNS else "small"
        runs.append(SimRun(f"r{n}", person, gpus, duration, limit, n))
    if spread:
        horizon = sum(r.gpus * r.duration for r in runs) / (HOSTS * GPUS_PER_HOST)
        small = [run for run in runs if run.person == "small"]
        for k, run in enumerate(small):
            run.arrives = horizon * k / len(small)
    return sorted(runs, key=lambda run: (run.arrives, run.seq))


@dataclass
class Cluster:
    """The simulated hosts: free GPU indices and what runs on each."""

    free: list[list[int]] = field(
        default_factory=lambda: [list(range(GPUS_PER_HOST)) for _ in range(HOSTS)]
    )
    running: list[dict[str, tuple[SimRun, tuple[int, ...]]]] = field(
        default_factory=lambda: [{} for _ in range(HOSTS)]
    )

    version: int = 0  # bumped at each start and end
    _cached: tuple[int, list[HostState]] = (-1, [])

    def states(self) -> list[HostState]:
        if self._cached[0] != self.version:
            self._cached = (self.version, self._states())
        return self._cached[1]

    def _states(self) -> list[HostState]:
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
    """Submitted runs, in submission order, in one line (`fair` False) or one per person; a
    window is the first `size` submitted and not yet started, taken in turns between people
    (agentsys.fair_share) when fair."""

    def __init__(self, runs: list[SimRun], *, fair: bool, shares: dict[str, float]):
        self.fair, self.shares = fair, shares
        self.lines: dict[str, list[SimRun]] = {}
        for run in runs:  # in submission order
            self.lines.setdefault(run.person if fair else "", []).append(run)
        self.next = dict.fromkeys(self.lines, 0)  # each line's first run not yet started
        self.in_use: dict[str, int] = {}
        self.left = len(runs)
        self.now = 0.0
        self.arrival_times = sorted(run.arrives for run in runs)
        self.by_arrival = sorted(runs, key=lambda run: run.arrives)
        self.submitted = 0  # how many of by_arrival are submitted by now
        self.queued: dict[str, int] = {}  # person -> GPUs submitted and not started

    def waiting(self) -> bool:
        """Whether a submitted run waits (runs start in no particular order, so: submitted
        so far more than started)."""
        submitted = bisect.bisect_right(self.arrival_times, self.now)
        return submitted > len(self.arrival_times) - self.left

    def window(self, size: int) -> list[QueuedRequest]:
        heads = {}
        for name, line in self.lines.items():
            position = self.next[name]
            while position < len(line) and line[position].started is not None:
                position += 1
            self.next[name] = position
            heads[name] = [run.ask for run in itertools.islice(self._waiting(line, position), size)]
        if not self.fair:
            return heads.get("", [])
        # What each person asks for weighs their turn (the product reads it in the claim's
        # window, or, for a queue longer than that, as summed up to 5 s before).
        arrivals = self.by_arrival
        while self.submitted < len(arrivals) and arrivals[self.submitted].arrives <= self.now:
            run = arrivals[self.submitted]
            self.queued[run.person] = self.queued.get(run.person, 0) + run.gpus
            self.submitted += 1
        return fair_order(heads, self.in_use, self.shares, size, self.queued)

    def start(self, run: SimRun) -> None:
        run.started = self.now
        self.left -= 1
        self.in_use[run.person] = self.in_use.get(run.person, 0) + run.gpus
        if self.fair:
            self.queued[run.person] -= run.gpus

    def _waiting(self, line: list[SimRun], position: int):
        for index in range(position, len(line)):  # not islice: it walks from the start
            run = line[index]
            if run.arrives > self.now:
                return
            if run.started is None:
                yield run


def simulate(policy, runs: list[SimRun], *, fair: bool = False, shares=None) -> dict:
    for run in runs:
        run.started = None
    queue = Queue(runs, fair=fair, shares=shares or {})
    cluster, by_id = Cluster(), {run.id: run for run in runs}
    ends: list[tuple[float, int, str]] = []
    arrivals = sorted({run.arrives for run in runs})
    busy_gpu_seconds, last, waited, busy_gpus = 0.0, 0.0, 0.0, 0

    def claim(host: int) -> int:
        """The product's claim on `host`: how many runs it started."""
        nonlocal busy_gpus
        free = cluster.free[host]
        if not free or not queue.left:
            return 0
        context = ClaimContext(host, queue.now, cluster.states)
        window = queue.window(FIRST_WINDOW)
        placements = policy.select(window, list(free), GPUS_PER_HOST, context)
        taken = sum(len(p.gpu_indices) for p in placements)
        if len(window) == FIRST_WINDOW and taken < len(free):
            window = queue.window(CLAIM_WINDOW)
            placements = policy.select(window, list(free), GPUS_PER_HOST, context)
        for placement in placements:
            run = by_id[placement.request_id]
            queue.start(run)
            for index in placement.gpu_indices:
                free.remove(index)
            cluster.running[host][run.id] = (run, placement.gpu_indices)
            cluster.version += 1
            busy_gpus += run.gpus
            heapq.heappush(ends, (queue.now + run.duration, host, run.id))
        return len(placements)

    def claim_everywhere(first: int | None = None) -> None:
        # Every runagentd claims at the NOTIFY; only the freed host's claim can differ unless
        # it changed the queue (its claim started something).
        if first is not None and not claim(first):
            return
        for host in range(HOSTS):
            if host != first and cluster.free[host]:
                claim(host)

    next_arrival = 0
    while ends or next_arrival < len(arrivals):
        arriving = next_arrival < len(arrivals) and (
            not ends or arrivals[next_arrival] <= ends[0][0]
        )
        at = arrivals[next_arrival] if arriving else ends[0][0]
        if queue.waiting():  # GPU time counts while submitted runs wait
            busy_gpu_seconds += busy_gpus * (at - last)
            waited += at - last
        last = queue.now = at
        if arriving:
            next_arrival += 1
            claim_everywhere()
            continue
        _, host, run_id = heapq.heappop(ends)
        run, indices = cluster.running[host].pop(run_id)
        cluster.free[host].extend(indices)
        cluster.version += 1
        busy_gpus -= run.gpus
        queue.in_use[run.person] -= run.gpus
        claim_everywhere(host)
    waits = {run.id: run.started - run.arrives for run in runs}
    return {
        "utilisation": busy_gpu_seconds / (HOSTS * GPUS_PER_HOST * waited),
        "largest_mean_wait": statistics.mean(waits[r.id] for r in runs if r.gpus == max(SIZES)),
        "median_wait": {
            person: statistics.median(waits[r.id] for r in runs if r.person == person)
            for person in ("big", "small")
        },
    }


def claims_per_s_64_hosts() -> tuple[float, float]:
    """64 processes, each a host's claimer with 8 GPUs as runagentd runs it (backfill, fair
    share between two people, one with 90 % of the requests), claim 1-GPU requests from one
    queue on PostgreSQL at once, in rounds, every host full then all their runs ended
    (bench/scheduler_claims.py's hosts_claims): (claims/s, run ends/s)."""
    from bench.harness import BenchSystem
    from bench.scheduler import claims_per_second_hosts

    BenchSystem()
    people = ("big",) * 9 + ("small",)
    return claims_per_second_hosts(64, 8, queued=12_800, policy="backfill", accounts=people)


def simulation(count: int) -> None:
    """The figures with every run queued at the start (`count` of them), FIFO and first fit
    from the same runs; then, on a tenth as many, the small person's runs submitted one at a
    time while the big person's sweep waits (`*_arrivals`)."""
    runs = make_runs(count, spread=False)
    results = _under_each_policy(runs)
    backfill, fifo, first_fit = results["backfill"], results["fifo"], results["first_fit"]
    report("backfill_gpu_utilisation", backfill["utilisation"], "ratio")
    report("fifo_gpu_utilisation", fifo["utilisation"], "ratio")
    report("first_fit_gpu_utilisation", first_fit["utilisation"], "ratio")
    largest = backfill["largest_mean_wait"] / fifo["largest_mean_wait"]
    report("largest_run_wait_vs_fifo", largest, "ratio")
    ratio = first_fit["largest_mean_wait"] / fifo["largest_mean_wait"]
    report("first_fit_largest_run_wait_vs_fifo", ratio, "ratio")
    report("small_person_wait_ratio", _small_over_big(backfill), "ratio")
    report("fifo_small_person_wait_ratio", _small_over_big(fifo), "ratio")
    # The least a share can give: the small person's runs ahead of every one of the big
    # person's while any wait.
    small_first = simulate(Backfill(), runs, fair=True, shares={"small": MAX_SHARE})
    report("small_person_wait_ratio_small_first", _small_over_big(small_first), "ratio")
    results = _under_each_policy(make_runs(max(1000, count // 10), spread=True))
    backfill, fifo = results["backfill"], results["fifo"]
    report("backfill_gpu_utilisation_arrivals", backfill["utilisation"], "ratio")
    report("first_fit_gpu_utilisation_arrivals", results["first_fit"]["utilisation"], "ratio")
    largest = backfill["largest_mean_wait"] / fifo["largest_mean_wait"]
    report("largest_run_wait_vs_fifo_arrivals", largest, "ratio")
    report("small_person_wait_ratio_arrivals", _small_over_big(backfill), "ratio")


def _under_each_policy(runs: list[SimRun]) -> dict[str, dict]:
    results = {}
    for name, policy, fair in (
        ("fifo", HeadReservation(), False),
        ("first_fit", FifoFirstFit(), False),
        ("backfill", Backfill(), True),
    ):
        started = time.perf_counter()
        results[name] = simulate(policy, runs, fair=fair)
        print(f"# {name}: simulated in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return results


def _small_over_big(result: dict) -> float:
    return result["median_wait"]["small"] / result["median_wait"]["big"]


def main() -> None:
    """Every figure; `python bench/scale.py sim [N]`: the simulation alone (N runs, default
    10^5); `... claims`: the claims figure alone; `... viewers`: the WebSocket figures
    (bench/scale_viewers.py); `... history [memory|sweep|runs|events]`: the stored-history
    figures (bench/scale_history.py)."""
    part, rest = (sys.argv[1:2] or ["all"])[0], sys.argv[2:]
    if part in ("all", "sim"):
        simulation(int(rest[0]) if part == "sim" and rest else RUNS)
    if part in ("all", "claims"):
        claims, ends = claims_per_s_64_hosts()
        report("claims_per_s_64_hosts", claims, "claims/s")
        report("run_ends_per_s_64_hosts", ends, "ends/s")
    if part in ("all", "viewers"):
        from bench.scale_viewers import viewers

        viewers()
    if part in ("all", "history"):
        from bench.scale_history import history

        history(rest if part == "history" else [])


if __name__ == "__main__":
    main()
