"""bench/scale.py's simulation times what its names say: every run starts once, after it was
submitted, on GPUs the product's policy gave it; utilisation and waits come out of those."""

from __future__ import annotations

from agentsys.backfill import Backfill
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


def test_the_smaller_ask_goes_ahead_of_the_sweep_and_a_share_still_weighs():
    runs = scale.make_runs(2000, spread=False)
    equal = scale.simulate(Backfill(), runs, fair=True)
    # The small person asks for a ninth of the sweep's GPUs: their runs wait under a tenth as
    # long (with equal shares alone, half the GPUs each, about a sixth).
    assert equal["median_wait"]["small"] <= 0.1 * equal["median_wait"]["big"]
    # A share of 9 for the sweep's person evens the asks out: the small person waits longer.
    evened = scale.simulate(Backfill(), runs, fair=True, shares={"big": 9})
    assert evened["median_wait"]["small"] > equal["median_wait"]["small"]
