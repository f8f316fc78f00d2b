"""ASHA's saving on a synthetic sweep (issue 39 §2): `asha_gpu_seconds_fraction`, the GPU
time of a 27-run sweep pruned by ASHA (max_steps 81, η = 3, grace 1) over the same sweep run in
full, and `asha_best_kept_seeds`, in how many of 10 seeds the full sweep's best run (lowest
final loss) trained to the end under ASHA.

Simulated time, real decisions: the runs' loss curves come from a synthetic family (a floor
set by the learning rate, best at 1e-2, the same decay for all, and noise; and apart, a
family whose curves cross, larger lrs falling faster at first),
run on 9 GPUs in the order made (a queue), each step ~1 s with ±10 % jitter, so runs reach the
rungs in an asynchronous, interleaved order. Each rung a run reaches is judged by the
product's own code (agentsys.asha.RungWatch and decide, as runagentd's executors feed them),
and a pruned run goes on for `STOP_LATENCY_S` before its processes end (the stop rule bench's
measured latency, rounded up). Full GPU time: every run's 81 steps."""

from __future__ import annotations

import heapq
import math
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agentsys.asha import RungWatch, decide, parse
from bench._report import report

RUNS, MAX_STEPS, GPUS, SEEDS = 27, 81, 9, 10
STOP_LATENCY_S = 1.0
NOISE = 0.002  # per step, on losses that end between 0.1 and 1.2
SPEC = parse(
    {"type": "asha", "metric": "loss", "grace_steps": 1, "reduction": 3, "max_steps": MAX_STEPS}
)


def family(rng: random.Random, *, crossing: float = 0.0) -> list[list[float]]:
    """27 loss curves, lr log-uniform in [1e-4, 1]: a floor set by the lr (best at 1e-2) plus
    a decay, with noise. `crossing` > 0 makes larger lrs fall faster at first, to a worse
    floor, so that curves cross: the case where any early stopping may cut the eventual
    best (printed apart, as asha_best_kept_seeds_crossing)."""
    curves = []
    for _ in range(RUNS):
        off = math.log10(10 ** rng.uniform(-4, 0)) + 2  # 0 at lr = 1e-2
        floor = 0.1 + off**2 / 4
        speed = 0.35 + crossing * off
        curves.append(
            [floor + 2.0 / (1 + speed * step) + rng.gauss(0, NOISE) for step in range(MAX_STEPS)]
        )
    return curves


def simulate(curves: list[list[float]], rng: random.Random, *, prune: bool) -> tuple[float, set]:
    """GPU-seconds spent, and the runs that trained to the end. A run ending (in full, or
    pruned) frees its GPU for the next run in the queue."""
    step_s = [rng.uniform(0.9, 1.1) for _ in curves]
    queue = list(range(len(curves)))
    events: list[tuple[float, int, int]] = []  # (when a step's row is written, run, step)

    def start_next(now: float) -> None:
        if queue:
            run = queue.pop(0)
            heapq.heappush(events, (now + step_s[run], run, 0))

    for _ in range(GPUS):
        start_next(0.0)
    watches = [RungWatch(SPEC) for _ in curves]
    recorded: dict[int, list[float]] = {}
    spent, finished = 0.0, set()
    while events:
        at, run, step = heapq.heappop(events)
        spent += step_s[run]
        reached = watches[run].feed({"_step": step, "loss": curves[run][step]})
        if prune and reached is not None:
            decision = decide(SPEC, recorded.get(reached.rung, []), reached.value, reached.rung)
            recorded.setdefault(reached.rung, []).append(reached.value)
            if not decision.keep:  # the row's look, the stop: the run goes on that long
                spent += STOP_LATENCY_S
                start_next(at + STOP_LATENCY_S)
                continue
        if step + 1 < MAX_STEPS:
            heapq.heappush(events, (at + step_s[run], run, step + 1))
        else:
            finished.add(run)
            start_next(at)
    return spent, finished


def sweep_seeds(*, crossing: float = 0.0) -> tuple[list[float], int]:
    """Each seed's pruned / full GPU time, and in how many seeds the best run was kept."""
    fractions, best_kept = [], 0
    for seed in range(SEEDS):
        curves = family(random.Random(seed), crossing=crossing)
        full, _ = simulate(curves, random.Random(1000 + seed), prune=False)
        pruned, finished = simulate(curves, random.Random(1000 + seed), prune=True)
        fractions.append(pruned / full)
        best = min(range(RUNS), key=lambda run: curves[run][-1])
        best_kept += best in finished
    return fractions, best_kept


def main() -> None:
    fractions, best_kept = sweep_seeds()
    report("asha_gpu_seconds_fraction", sum(fractions) / len(fractions), "ratio")
    report("asha_gpu_seconds_fraction_max", max(fractions), "ratio")
    report("asha_best_kept_seeds", best_kept, f"of {SEEDS}")
    fractions, best_kept = sweep_seeds(crossing=0.05)
    report("asha_gpu_seconds_fraction_crossing", sum(fractions) / len(fractions), "ratio")
    report("asha_best_kept_seeds_crossing", best_kept, f"of {SEEDS}")
