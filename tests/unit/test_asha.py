"""Early stopping across a sweep (agentsys.asha): its rungs, its cut-offs checked by hand and
against numpy, the rows that reach a rung, and what a bad `early_stop` is told."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from agentsys.asha import RungWatch, decide, parse, quantile, rungs_of

SPEC = parse({"type": "asha", "metric": "loss", "grace_steps": 1, "reduction": 3, "max_steps": 27})


def run_sequentially(spec, curves):
    """Each run in turn through the rungs, as one GPU runs a sweep's runs one after the other:
    {run: the rung it was stopped at, or None}, and each decision's words."""
    recorded: dict[int, list[float]] = {}
    stopped, words = {}, {}
    for run, curve in enumerate(curves):
        watch, stopped[run] = RungWatch(spec), None
        for step, loss in enumerate(curve):
            reached = watch.feed({"_step": step, "loss": loss})
            if reached is None:
                continue
            decision = decide(spec, recorded.get(reached.rung, []), reached.value, reached.rung)
            recorded.setdefault(reached.rung, []).append(reached.value)
            words[run, reached.rung] = decision.words
            if not decision.keep:
                stopped[run] = reached.rung
                break
    return stopped, words


def test_rungs_are_grace_times_powers_of_eta_below_max_steps():
    assert rungs_of(SPEC) == [1, 3, 9]
    assert rungs_of({**SPEC, "max_steps": 81}) == [1, 3, 9, 27]
    assert rungs_of({**SPEC, "grace_steps": 10, "reduction": 2, "max_steps": 100}) == [
        10,
        20,
        40,
        80,
    ]
    assert rungs_of({**SPEC, "grace_steps": 5, "reduction": 1.5, "max_steps": 12}) == [5, 8, 11]


def test_quantile_interpolates_as_numpy_does():
    rng = random.Random(7)
    for n in range(1, 30):
        values = [rng.uniform(-5, 5) for _ in range(n)]
        for q in (0.0, 1 / 3, 0.25, 0.5, 2 / 3, 1.0):
            assert quantile(values, q) == pytest.approx(np.percentile(values, 100 * q))


def test_the_cut_off_is_numpys_to_the_last_bit_among_losses_equal_but_for_it():
    # Learning rates symmetric about the best give losses equal in exact arithmetic and
    # a bit apart in floats (the ASHA sweep test's): which of such a pair is kept must not
    # depend on how the interpolation is written.
    lrs = [10 ** (-4 + 4 * i / 26) for i in range(27)]
    losses = [(math.log10(lr) + 2) ** 2 / 4 + 0.5 for lr in lrs]
    rng = random.Random(3)
    for _ in range(300):
        values = rng.sample(losses, rng.randint(2, 26))
        for q in (1 / 3, 2 / 3, 0.25, 0.75):
            assert quantile(values, q) == float(np.quantile(values, q))


def test_nine_runs_one_at_a_time_against_a_hand_computation():
    """Flat curves, η = 3, rungs 1, 3 and 9, in this order: 5 3 8 1 9 2 7 4 6.
    5 is first everywhere (kept); 3 ≤ 5 (kept at each rung); 8 against {3, 5}: the 1/3
    quantile is 3 + 2·1/3 = 3.667, stopped at rung 1; 1 against {3, 5, 8}: 4.333, kept, and
    kept at rungs 3 and 9 (3.667); 9 against {1, 3, 5, 8}: 3, stopped; 2 against
    {1, 3, 5, 8, 9}: 3.667, kept, then against {1, 3, 5} at rungs 3 and 9: 2.333, kept;
    7 against {1, 2, 3, 5, 8, 9}: 2.667, stopped; 4 against seven values: 3, stopped; 6
    against eight: 3.333, stopped."""
    curves = [[value] * 27 for value in (5, 3, 8, 1, 9, 2, 7, 4, 6)]
    stopped, words = run_sequentially(SPEC, curves)
    assert stopped == {0: None, 1: None, 2: 1, 3: None, 4: 1, 5: None, 6: 1, 7: 1, 8: 1}
    assert (
        words[2, 1]
        == "ASHA rung 1: loss 8 not in the top 1/3 of the 3 runs there (> cut-off 3.66667)"
    )
    assert words[4, 1].endswith("(> cut-off 3)")
    assert (
        words[5, 3]
        == "ASHA rung 3: loss 2 in the top 1/3 of the 4 runs there (within cut-off 2.33333)"
    )
    assert words[6, 1].endswith("of the 7 runs there (> cut-off 2.66667)")
    assert words[8, 1].endswith("of the 9 runs there (> cut-off 3.33333)")
    assert words[0, 1] == "ASHA rung 1: the first run there goes on"


def reference(values_at, eta, rungs):
    """ASHA one run at a time, written out with numpy: the rung each run is stopped at."""
    recorded = {rung: [] for rung in rungs}
    stopped = {}
    for run, at in enumerate(values_at):
        stopped[run] = None
        for rung in rungs:
            value = at(rung)
            cut = np.percentile(recorded[rung], 100 / eta) if recorded[rung] else math.inf
            recorded[rung].append(value)
            if value > cut:
                stopped[run] = rung
                break
    return stopped


def test_twenty_seven_runs_of_a_synthetic_family_match_the_reference():
    """Losses that fall as 1/step towards a floor set by the learning rate, noisy, in a
    shuffled order: each run stopped at the rung the written-out reference says."""
    spec = parse({"type": "asha", "metric": "loss", "reduction": 3, "max_steps": 81})
    rng = random.Random(3)
    lrs = [10 ** rng.uniform(-4, 0) for _ in range(27)]
    noise = [[rng.gauss(0, 0.01) for _ in range(81)] for _ in range(27)]

    def loss(run, step):
        floor = (math.log10(lrs[run]) + 2) ** 2 / 4
        return floor + 1 / (step + 1) + noise[run][step]

    curves = [[loss(run, step) for step in range(81)] for run in range(27)]
    stopped, _ = run_sequentially(spec, curves)
    expected = reference(
        [lambda rung, r=run: curves[r][rung] for run in range(27)], 3, [1, 3, 9, 27]
    )
    assert stopped == expected
    assert sum(1 for rung in stopped.values() if rung is not None) >= 15  # most are pruned
    best = min(range(27), key=lambda run: curves[run][-1])
    assert stopped[best] is None


def test_max_mode_keeps_the_top_third_from_above():
    spec = {**SPEC, "metric": "acc", "mode": "max"}
    # The 2/3 quantile of {0.1, 0.5, 0.9}: 0.5 + 0.4·1/3 = 0.633.
    low = decide(spec, [0.1, 0.5, 0.9], 0.6, 3)
    assert (low.keep, low.cutoff) == (False, pytest.approx(0.6333333))
    assert decide(spec, [0.1, 0.5, 0.9], 0.7, 3).keep is True
    assert "< cut-off 0.633333" in low.words


def test_a_nan_is_stopped_and_counts_in_no_cut_off():
    nan = decide(SPEC, [], math.nan, 1)
    assert (nan.keep, nan.words) == (False, "ASHA rung 1: loss is nan")
    assert decide(SPEC, [math.nan, 2.0], 2.0, 1).keep is True  # against {2.0} alone
    ended = decide(SPEC, [1.0], 9.0, 1, ended=True)
    assert ended.keep is True and "read at its end" in ended.words


def test_rows_reach_rungs_once_and_a_jump_is_judged_at_the_highest():
    watch = RungWatch({**SPEC, "max_steps": 81})
    assert watch.feed({"_step": 0, "loss": 1.0}) is None
    assert watch.feed({"_step": 1, "loss": 0.9}).rung == 1
    assert watch.feed({"_step": 2, "loss": 0.8}) is None
    assert watch.feed({"_step": 1, "loss": 0.8}) is None  # a step again (another source)
    assert watch.feed({"acc": 0.5, "_step": 40}) is None  # not its metric
    jumped = watch.feed({"_step": 30, "loss": 0.5})
    assert (jumped.rung, jumped.value, jumped.step) == (27, 0.5, 30)
    assert watch.feed({"_step": 80, "loss": 0.4}) is None  # no rung left below max_steps
    # Rows with no step are numbered as the series store does: 0, 1, 2, ...
    unnumbered = RungWatch(SPEC)
    assert [unnumbered.feed({"loss": 1.0}) for _ in range(4)][1].rung == 1
    # A rung that could not be judged (the database) is judged at the next row past it.
    again = RungWatch(SPEC)
    reached = again.feed({"_step": 3, "loss": 1.0})
    again.forget(reached)
    assert again.feed({"_step": 4, "loss": 0.9}).rung == 3


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ([], "must be an object"),
        ({"type": "hyperband", "metric": "loss", "max_steps": 9}, 'type must be "asha"'),
        ({"type": "asha", "max_steps": 9}, "metric must name a metric"),
        ({"type": "asha", "metric": "_step", "max_steps": 9}, "is a step or time"),
        ({"type": "asha", "metric": "loss"}, "max_steps is needed"),
        ({"type": "asha", "metric": "loss", "max_steps": 9, "reduction": 1}, "more than 1"),
        ({"type": "asha", "metric": "loss", "max_steps": 9, "mode": "lowest"}, '"min" or "max"'),
        ({"type": "asha", "metric": "loss", "max_steps": 9, "grace_steps": 0}, "at least 1"),
        ({"type": "asha", "metric": "loss", "max_steps": 9, "grace_steps": 9}, "more than grace"),
        ({"type": "asha", "metric": "loss", "max_steps": 9.5}, "whole number"),
        ({"type": "asha", "metric": "loss", "max_steps": 9, "eta": 3}, "unknown key 'eta'"),
    ],
)
def test_a_bad_early_stop_is_told_what_is_wrong(spec, said):
    with pytest.raises(ValueError, match=None) as raised:
        parse(spec)
    assert said in str(raised.value)


def test_defaults_fill_in_and_none_is_none():
    assert parse(None) is None and parse({}) is None
    assert parse({"type": "asha", "metric": "loss", "max_steps": 81}) == {
        "type": "asha",
        "metric": "loss",
        "mode": "min",
        "grace_steps": 1,
        "reduction": 3,
        "max_steps": 81,
    }
