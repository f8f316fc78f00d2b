"""Stop rules (agentsys.stop_rules): what a bad rule is told, and which row meets which rule."""

from __future__ import annotations

import math

import pytest

from agentsys.stop_rules import StopRules, parse


def rules_of(*rules, started_at=0.0):
    return StopRules(parse(list(rules)), started_at=started_at)


# -- parse ----------------------------------------------------------------------------------


def test_parse_fills_in_defaults_and_keeps_bounds_as_given():
    parsed = parse(
        [
            {"metric": "loss", "above": 2.0, "after_step": 100},
            {"metric": "loss", "below": 1},
            {"metric": "loss", "nan": True},
            {"metric": "val_loss", "no_improvement_steps": 500},
            {"wall_seconds": 3600},
        ]
    )
    assert parsed[0] == {"metric": "loss", "above": 2.0, "after_step": 100}
    assert parsed[1] == {"metric": "loss", "below": 1}
    assert parsed[3] == {
        "metric": "val_loss",
        "no_improvement_steps": 500,
        "mode": "min",
        "min_delta": 0.0,
    }
    assert parse(None) == [] and parse([]) == []


@pytest.mark.parametrize(
    ("rules", "said"),
    [
        ({"metric": "loss"}, "must be a list"),
        ([{"metric": "loss"}], "exactly one of above, below, nan"),
        ([{"metric": "loss", "above": 1, "below": 0}], "has above and below"),
        ([{"metric": "loss", "abve": 1}], r"has none \(unknown key 'abve'\)"),
        ([{"metric": "loss", "above": 1, "mode": "min"}], "unknown key 'mode'"),
        ([{"metric": "loss", "above": "2"}], "above must be a number"),
        ([{"metric": "loss", "above": True}], "above must be a number"),
        ([{"metric": "loss", "above": math.inf}], "finite"),
        ([{"metric": "", "above": 1}], "metric must name a metric"),
        ([{"metric": "_step", "above": 1}], "not a metric"),
        ([{"metric": "loss", "nan": False}], "nan must be true"),
        ([{"metric": "l", "no_improvement_steps": 0}], "at least 1"),
        ([{"metric": "l", "no_improvement_steps": 1.5}], "whole number"),
        ([{"metric": "l", "no_improvement_steps": 5, "mode": "lowest"}], "mode must be"),
        ([{"metric": "l", "no_improvement_steps": 5, "min_delta": -1}], "min_delta"),
        ([{"metric": "l", "above": 1, "after_step": -1}], "at least 0"),
        ([{"wall_seconds": 0}], "more than 0"),
        ([{"wall_seconds": 10, "metric": "loss"}], "unknown key 'metric'"),
        (["loss > 2"], "a rule is an object"),
        ([{"wall_seconds": 1}] * 51, "at most 50"),
    ],
)
def test_a_bad_rule_is_named_with_why(rules, said):
    with pytest.raises(ValueError, match=said) as raised:
        parse(rules)
    if isinstance(rules, list) and len(rules) == 1:
        assert str(raised.value).startswith("stop_when[0] ")


def test_the_error_names_the_rule_by_index_and_text():
    with pytest.raises(ValueError) as raised:
        parse([{"wall_seconds": 5}, {"metric": "loss", "abov": 2.0}], field="runs.stop_when")
    assert str(raised.value).startswith('runs.stop_when[1] {"metric": "loss", "abov": 2.0}: ')


# -- evaluation -----------------------------------------------------------------------------


def test_above_after_step_words_as_the_issue_says():
    rules = rules_of({"metric": "loss", "above": 2.0, "after_step": 100})
    assert rules.feed({"_step": 50, "loss": 9.0}) is None  # not yet past step 100
    assert rules.feed({"_step": 100, "loss": 9.0}) is None
    assert rules.feed({"_step": 120, "loss": 1.5}) is None
    hit = rules.feed({"_step": 140, "loss": 3.71})
    assert hit.words == "loss > 2.0 after step 100: 3.71 at step 140"
    assert hit.rule == {"metric": "loss", "above": 2.0, "after_step": 100}


def test_below_and_other_metrics_and_non_numbers():
    rules = rules_of({"metric": "loss", "below": 0.01})
    assert rules.feed({"_step": 1, "acc": 0.0, "loss": "low"}) is None
    assert rules.feed({"step": 2, "loss": True}) is None
    assert rules.feed({"global_step": 3, "loss": 0.0093}).words == ("loss < 0.01: 0.0093 at step 3")


def test_nan_and_inf_meet_the_nan_rule_and_never_a_bound():
    bound = rules_of({"metric": "loss", "above": 2.0})
    assert bound.feed({"_step": 1, "loss": math.nan}) is None
    nan = rules_of({"metric": "loss", "nan": True})
    assert nan.feed({"_step": 1, "loss": 1.0}) is None
    assert nan.feed({"_step": 2, "loss": math.nan}).words == "loss is NaN or inf: nan at step 2"
    inf = rules_of({"metric": "loss", "nan": True})
    assert inf.feed({"_step": 7, "loss": -math.inf}).words == "loss is NaN or inf: -inf at step 7"


def test_rows_without_a_step_count_per_metric():
    rules = rules_of({"metric": "loss", "above": 5})
    for value in (1, 2, 3):
        assert rules.feed({"loss": value}) is None
    assert rules.feed({"loss": 6}).words == "loss > 5: 6 at step 3"


def test_no_improvement_min_with_min_delta():
    rules = rules_of(
        {"metric": "val_loss", "no_improvement_steps": 500, "mode": "min", "min_delta": 0.001}
    )
    assert rules.feed({"_step": 0, "val_loss": 1.0}) is None
    assert rules.feed({"_step": 400, "val_loss": 0.5}) is None  # best: 0.5 at 400
    assert rules.feed({"_step": 800, "val_loss": 0.4995}) is None  # within min_delta
    assert rules.feed({"_step": 850, "val_loss": math.nan}) is None
    hit = rules.feed({"_step": 900, "val_loss": 0.4999})
    assert hit.words == (
        "val_loss no better (min, min_delta 0.001) for 500 steps: best 0.5 at step 400, "
        "0.4999 at step 900"
    )


def test_no_improvement_max_resets_on_a_new_best():
    rules = rules_of({"metric": "acc", "no_improvement_steps": 10, "mode": "max"})
    assert rules.feed({"_step": 0, "acc": 0.1}) is None
    assert rules.feed({"_step": 9, "acc": 0.05}) is None
    assert rules.feed({"_step": 9, "acc": 0.2}) is None  # new best at 9
    assert rules.feed({"_step": 18, "acc": 0.2}) is None
    assert rules.feed({"_step": 19, "acc": 0.2}).words.startswith("acc no better (max")


def test_no_improvement_waits_for_a_finite_value():
    rules = rules_of({"metric": "loss", "no_improvement_steps": 2})
    assert rules.feed_all([{"_step": s, "loss": math.nan} for s in range(10)]) is None
    assert rules.feed({"_step": 10, "loss": 1.0}) is None
    assert rules.feed({"_step": 12, "loss": 1.0}) is not None


def test_the_first_rule_met_is_said_and_feed_all_stops_there():
    rules = rules_of({"metric": "loss", "nan": True}, {"metric": "loss", "above": 2})
    rows = [{"_step": 1, "loss": 1}, {"_step": 2, "loss": 3}, {"_step": 3, "loss": math.nan}]
    assert rules.feed_all(rows).words == "loss > 2: 3 at step 2"


def test_wall_seconds():
    rules = rules_of({"wall_seconds": 3600}, started_at=1000.0)
    assert rules
    assert rules.feed({"_step": 1, "loss": 1e9}) is None
    assert rules.check_time(4599.0) is None
    assert rules.check_time(4601.4).words == "wall time >= 3600 s: 3601 s"
    assert not StopRules([], started_at=0.0)


def test_a_long_run_is_o1_per_row():
    # 200k rows through three rules: a check per row, nothing kept per row.
    rules = rules_of(
        {"metric": "loss", "above": 1e9},
        {"metric": "loss", "nan": True},
        {"metric": "loss", "no_improvement_steps": 10**9},
    )
    for step in range(200_000):
        assert rules.feed({"_step": step, "loss": 1.0 / (step + 1)}) is None
    assert rules._by_metric["loss"][2].best_step == 199_999
