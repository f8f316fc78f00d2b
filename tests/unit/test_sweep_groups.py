"""Seed groups of a sweep's table (scheduler_app.sweeps.groups): which runs group, each metric
column's mean, spread and count over the done runs, and how groups sort."""

import math
import statistics

import pytest

from scheduler_app.sweeps.groups import group_rows, is_seed, sort_groups, stats, without_seed


def row(run_id, params, loss=None, status="done"):
    metrics = {} if loss is None else {"loss": {"last": loss, "min": loss / 2, "max": 2.0}}
    return {"run_id": run_id, "status": status, "params": params, "metrics": metrics}


def test_runs_equal_but_for_a_seed_form_a_group_whatever_the_seed_is_called():
    rows = [
        row("a", {"lr": 0.1, "seed": 1}, 0.5),
        row("b", {"lr": 0.1, "seed": 2}, 0.3),
        row("c", {"lr": 0.01, "seed": 1}, 0.9),
        row("d", {"lr": 0.1, "Random-Seed": 3}, 0.4),  # another name for a seed
        row("e", {"lr": 0.10}, 0.2),  # no seed: a rerun of the same params
    ]
    groups = group_rows(rows, {})
    assert [g.run_ids for g in groups] == [["a", "b", "d", "e"], ["c"]]
    assert groups[0].params == {"lr": 0.1} and groups[0].seeds == [1, 2, 3, None]
    assert groups[0].id.startswith("group-") and groups[0].id != groups[1].id
    assert is_seed("SEED") and is_seed("random_state") and not is_seed("seeds_per_batch")


def test_params_the_table_shows_no_column_for_still_tell_groups_apart():
    rows = [row("a", {"lr": 0.1, "seed": 1}), row("b", {"lr": 0.1, "seed": 2})]
    every = {
        "a": {"lr": 0.1, "seed": 1, "model": {"depth": 12}},
        "b": {"lr": 0.1, "seed": 2, "model": {"depth": 24}},
    }
    assert [g.run_ids for g in group_rows(rows, every)] == [["a"], ["b"]]
    # 1 and 1.0 are one number, true is not 1, and a null is no param.
    same = [row("c", {"bs": 1, "x": None}), row("d", {"bs": 1.0}), row("e", {"bs": True})]
    assert [g.run_ids for g in group_rows(same, {})] == [["c", "d"], ["e"]]


def test_mean_spread_and_n_count_the_done_runs_with_a_finite_value():
    rows = [
        row("a", {"lr": 0.1, "seed": 1}, 0.5),
        row("b", {"lr": 0.1, "seed": 2}, 0.3),
        row("c", {"lr": 0.1, "seed": 3}, math.nan),  # diverged, yet done
        row("d", {"lr": 0.1, "seed": 4}, 0.1, status="running"),  # not counted yet
        row("e", {"lr": 0.1, "seed": 5}, 0.1, status="failed"),
    ]
    (group,) = group_rows(rows, {})
    last = group.metrics["loss"]["last"]
    assert last["mean"] == pytest.approx(0.4) and last["std"] == pytest.approx(
        statistics.stdev([0.5, 0.3])
    )
    assert (last["min"], last["max"], last["n"], last["bad"], last["count"]) == (0.3, 0.5, 2, 1, 5)
    assert group.metrics["loss"]["min"]["mean"] == pytest.approx(0.2)
    assert group.statuses == {"done": 3, "running": 1, "failed": 1}


def test_one_value_has_no_spread_and_none_has_no_mean():
    assert stats([0.5], 1) == {
        "mean": 0.5,
        "std": None,
        "min": 0.5,
        "max": 0.5,
        "n": 1,
        "bad": 0,
        "count": 1,
    }
    assert stats([None, math.inf], 3)["mean"] is None
    assert stats([None, math.inf], 3)["bad"] == 1


def test_groups_sort_by_their_mean_on_a_metric_and_keep_the_tables_order_otherwise():
    rows = [
        row("a1", {"lr": 1, "seed": 1}, 0.1),  # best run, worst mean
        row("b1", {"lr": 2, "seed": 1}, 0.3),
        row("a2", {"lr": 1, "seed": 2}, 0.9),
        row("b2", {"lr": 2, "seed": 2}, 0.4),
        row("c1", {"lr": 3, "seed": 1}),  # no loss: last either way
    ]
    groups = group_rows(rows, {})
    by = {g.params["lr"]: g for g in groups}
    assert by[1].metrics["loss"]["last"]["mean"] == pytest.approx(0.5)
    ascending = sort_groups(groups, "metric.loss.last")
    assert [g.params["lr"] for g in ascending] == [2, 1, 3]
    descending = sort_groups(groups, "-metric.loss.last")
    assert [g.params["lr"] for g in descending] == [1, 2, 3]
    assert [g.params["lr"] for g in sort_groups(groups, "-created_at")] == [1, 2, 3]


def test_runs_of_two_scripts_are_no_group_though_their_params_are_equal():
    """Seen from outside: the demo's printed-lines run (train_prints.py, lr 0.1, seed 0) was
    counted into train.py's lr 0.1 group. A command less its seed arguments tells them apart."""
    rows = [row(run, {"lr": 0.1, "seed": seed}) for run, seed in (("a", 0), ("b", 1), ("c", 0))]
    commands = {
        "a": "python train.py --lr=0.1 --seed=0",
        "b": "python train.py --lr=0.1 --seed 1",
        "c": "python train_prints.py --lr=0.1 --seed=0",
    }
    assert [g.run_ids for g in group_rows(rows, {}, commands)] == [["a", "b"], ["c"]]
    assert without_seed("SEED=3 python t.py --random-seed=4 --seedling 2") == (
        "python t.py --seedling 2"
    )
