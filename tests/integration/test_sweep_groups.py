"""A sweep's table grouped by seed over REST (`group=seed`, what the sweep page draws from):
one group per set of params equal but for a seed, each metric column's mean, spread and
count over the group's done runs, its runs one click away; sorted by mean, paged by group."""

import statistics

import pytest

from scheduler_app.models import Sweep
from tests.integration.test_sweep_table_api import run_of, table

pytestmark = pytest.mark.django_db


@pytest.fixture
def sweep():
    sweep = Sweep.objects.create(name="seeds")
    loss = {"a1": 0.5, "a2": 0.3, "b1": 0.2, "b2": 0.25}
    for name, last in loss.items():
        lr = 0.1 if name[0] == "a" else 0.01
        run_of(sweep, name, {"lr": lr, "seed": int(name[1])}, {"loss": (last, last, 2.0)})
    run_of(sweep, "b3", {"lr": 0.01, "seed": 3}, {"loss": (0.1, 0.1, 2.0)}, status="running")
    run_of(sweep, "c1", {"lr": 1.0, "seed": 1}, {}, status="failed")
    return sweep


def test_runs_with_two_seeds_are_one_group_with_mean_spread_and_count(api, sweep):
    body = table(api, sweep, group="seed", sort="param.lr")
    assert body["seed_params"] == ["param.seed"]
    assert (body["total"], body["runs_total"], body["run_count"]) == (3, 6, 6)
    by_lr = {g["params"]["lr"]: g for g in body["groups"]}
    a = by_lr[0.1]
    loss = a["metrics"]["loss"]["last"]
    assert loss["mean"] == pytest.approx(0.4)
    assert loss["std"] == pytest.approx(statistics.stdev([0.5, 0.3]))
    assert (loss["min"], loss["max"], loss["n"], loss["count"]) == (0.3, 0.5, 2, 2)
    assert a["count"] == 2 and sorted(a["seeds"]) == [1, 2]
    # Its runs are one click away: each in rows, with its link.
    rows = {row["run_id"]: row for row in body["rows"]}
    assert sorted(rows[run_id]["name"] for run_id in a["run_ids"]) == ["a1", "a2"]
    assert all(rows[run_id]["url"] == f"/runs/{run_id}/" for run_id in a["run_ids"])
    # A running run is in its group's count, not in its mean: n=2 of 3.
    b = by_lr[0.01]["metrics"]["loss"]["last"]
    assert (b["n"], b["count"], b["mean"]) == (2, 3, pytest.approx(0.225))
    assert by_lr[0.01]["statuses"] == {"done": 2, "running": 1}
    assert by_lr[1.0]["metrics"] == {} and by_lr[1.0]["count"] == 1


def test_groups_sort_by_their_mean_and_page_and_filter_as_the_runs_do(api, sweep):
    def lrs(**query):
        return [g["params"]["lr"] for g in table(api, sweep, group="seed", **query)["groups"]]

    assert lrs(sort="metric.loss.last") == [0.01, 0.1, 1.0]  # 0.225, 0.4, none
    assert lrs(sort="-metric.loss.last") == [0.1, 0.01, 1.0]
    page = table(api, sweep, group="seed", sort="metric.loss.last", limit=1, offset=1)
    assert page["total"] == 3 and [g["params"]["lr"] for g in page["groups"]] == [0.1]
    assert sorted(row["name"] for row in page["rows"]) == ["a1", "a2"]
    # Filters pick runs first: the group is what passes of it.
    kept = table(api, sweep, group="seed", where="metric.loss.last:lt:0.4")
    assert {g["params"]["lr"]: g["count"] for g in kept["groups"]} == {0.1: 1, 0.01: 3}
    assert table(api, sweep, group="seed", status="failed")["runs_total"] == 1


def test_without_group_the_table_is_one_row_a_run_as_before(api, sweep):
    body = table(api, sweep)
    assert body["groups"] is None and len(body["rows"]) == body["total"] == 6
    assert body["seed_params"] == ["param.seed"]
    bad = api("get", f"/api/sweeps/{sweep.id}/table?group=lr")
    assert bad.status_code == 422


def test_the_sweep_page_offers_the_grouping(browser, sweep):
    page = browser.get(f"/sweeps/{sweep.pk}/").content.decode()
    assert 'id="group-seed"' in page and "js/sweep_groups.js" in page
