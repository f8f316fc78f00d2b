"""bench/scale.py's simulation times what its names say: every run starts once, after it was
submitted, on GPUs the product's policy gave it; utilisation and waits come out of those."""

from __future__ import annotations

from agentsys.backfill import Backfill
from agentsys.fair_share import MAX_SHARE
from agentsys.scheduling import HeadReservation
from bench import scale


def test_every_run_starts_once_after_its_submission_and_backfill_fills_more_gpus():
    runs = scale.make_runs(2000, spread=False)
    fifo = scale.simulate(HeadReservation(), runs, fair=False)
    fifo_starts = {run.id: run.started for run in runs}
    backfill = scale.simulate(Backfill(), runs, fair=True)
    for run in runs:
        assert run.started is not None and run.started >= run.arrives
        assert fifo_starts[run.id] >= run.arrives
    assert 0 < fifo["utilisation"] <= backfill["utilisation"] <= 1
    assert backfill["median_wait"]["small"] < fifo["median_wait"]["small"]


def test_the_small_persons_largest_share_puts_their_runs_ahead_of_the_sweep():
    runs = scale.make_runs(2000, spread=False)
    equal = scale.simulate(Backfill(), runs, fair=True)
    small_first = scale.simulate(Backfill(), runs, fair=True, shares={"small": MAX_SHARE})
    # Freed GPUs go to the small person's runs while any waits, not half of them.
    assert small_first["median_wait"]["small"] < 0.75 * equal["median_wait"]["small"]
