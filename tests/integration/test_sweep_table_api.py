"""The sweep table over REST (issue 21): every run of a sweep, params against metrics,
sorted, filtered, paged, as JSON and CSV; sweeps listed and made."""

import csv
import io
import math
from urllib.parse import urlencode

import pytest

from scheduler_app.models import MetricSeries, Run, Sweep

pytestmark = pytest.mark.django_db


def run_of(sweep, name, params, metrics=None, status="done", **fields):
    run = Run.objects.create(
        name=name, command="python t.py", sweep=sweep, params=params, status=status, **fields
    )
    for key, (last, low, high) in (metrics or {}).items():
        MetricSeries.objects.create(
            run=run,
            agent_id=f"exec-{name}",
            key=key,
            source="tensorboard",
            points=10,
            last_step=10,
            last_value=last,
            min_value=low,
            max_value=high,
        )
    return run


@pytest.fixture
def sweep():
    sweep = Sweep.objects.create(name="lr sweep")
    run_of(sweep, "a", {"lr": 0.1, "opt": "sgd"}, {"loss": (0.5, 0.4, 2.0), "acc": (0.8, 0, 0.8)})
    run_of(sweep, "b", {"lr": 0.01, "opt": "adam"}, {"loss": (0.2, 0.2, 2.1)})
    run_of(sweep, "c", {"lr": "auto", "opt": "adam"}, {"loss": (math.nan, 0.3, 2.2)}, "failed")
    run_of(sweep, "d", {"lr": 1.0}, {}, status="running")  # no metric yet
    return sweep


def get(api, path, query):
    return api("get", f"{path}?{urlencode(query, doseq=True)}")


def table(api, sweep, **query):
    response = get(api, f"/api/sweeps/{sweep.id}/table", query)
    assert response.status_code == 200, response.content
    return response.json()


def names(body):
    return [row["name"] for row in body["rows"]]


def test_every_run_is_a_row_with_its_params_and_each_metrics_last_min_max(api, sweep):
    body = table(api, sweep)
    assert body["total"] == body["run_count"] == 4
    ids = [column["id"] for column in body["columns"]]
    assert ids[:5] == ["name", "status", "created_at", "duration_s", "exit_code"]
    assert ids[5:] == [
        "param.lr",
        "param.opt",
        "metric.acc.last",
        "metric.acc.min",
        "metric.acc.max",
        "metric.loss.last",
        "metric.loss.min",
        "metric.loss.max",
    ]
    types = {column["id"]: column["type"] for column in body["columns"]}
    assert types["param.lr"] == "mixed" and types["param.opt"] == "string"
    row = {r["name"]: r for r in body["rows"]}
    assert row["a"]["params"] == {"lr": 0.1, "opt": "sgd"}
    assert row["a"]["metrics"]["loss"] == {
        "last": 0.5,
        "min": 0.4,
        "max": 2.0,
        "last_step": 10,
        "points": 10,
        "source": "tensorboard",
    }
    assert row["c"]["metrics"]["loss"]["last"] == "NaN"
    assert row["a"]["url"] == f"/runs/{row['a']['run_id']}/"
    assert row["a"]["created_at"].endswith("Z") and row["a"]["finished_at"] is None


def test_params_the_script_logged_fill_in_where_the_run_set_none(api):
    sweep = Sweep.objects.create(name="logged")
    run_of(sweep, "own", {"lr": 0.1}, logged_params={"lr": 0.5, "batch": 32})
    body = table(api, sweep)
    assert body["rows"][0]["params"] == {"lr": 0.1, "batch": 32}  # its own lr wins


def test_sorting_puts_numbers_then_strings_then_nan_then_missing(api, sweep):
    assert names(table(api, sweep, sort="metric.loss.last")) == ["b", "a", "c", "d"]
    assert names(table(api, sweep, sort="-metric.loss.last")) == ["a", "b", "c", "d"]
    assert names(table(api, sweep, sort="param.lr")) == ["b", "a", "d", "c"]  # "auto" after
    assert names(table(api, sweep, sort="-param.lr")) == ["d", "a", "b", "c"]
    # Ties keep the newest first; d has no opt.
    assert names(table(api, sweep, sort="param.opt")) == ["c", "b", "a", "d"]
    assert names(table(api, sweep, sort="name")) == ["a", "b", "c", "d"]


def test_filters_by_status_param_value_and_metric_range(api, sweep):
    assert names(table(api, sweep, status="done,failed", sort="name")) == ["a", "b", "c"]
    assert names(table(api, sweep, where="param.opt:eq:adam", sort="name")) == ["b", "c"]
    assert names(table(api, sweep, where="param.lr:eq:0.10")) == ["a"]  # as a number
    both = table(api, sweep, where=["metric.loss.last:between:0,0.3", "param.opt:ne:sgd"])
    assert names(both) == ["b"]
    assert names(table(api, sweep, where="metric.loss.min:gt:0.25", sort="name")) == ["a", "c"]
    assert names(table(api, sweep, where="param.lr:contains:AUT")) == ["c"]


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ({"where": "param.momentum:eq:0.9"}, "no column 'param.momentum'"),
        ({"where": "metric.loss.last:near:1"}, "op 'near' is not one of"),
        ({"where": "metric.loss.last:lt:low"}, "'low' is not a number"),
        ({"where": "metric.loss.last:between:1"}, "give two numbers"),
        ({"where": "loss"}, "write <column>:<op>:<value>"),
        ({"sort": "-metric.bleu.last"}, "sort: no column 'metric.bleu.last'"),
        ({"status": "finished"}, "finished is not a run status"),
    ],
)
def test_a_query_the_table_cannot_apply_is_422_saying_why(api, sweep, query, says):
    response = get(api, f"/api/sweeps/{sweep.id}/table", query)
    assert response.status_code == 422, response.content
    assert says in response.json()["detail"]


def test_an_unknown_sweep_is_404(api):
    response = api("get", "/api/sweeps/sweep-nope/table")
    assert response.status_code == 404 and "no sweep 'sweep-nope'" in response.json()["detail"]


def test_csv_has_every_filtered_row_in_order_and_no_formulas(api, sweep):
    run_of(sweep, "=HYPERLINK()", {"lr": 0.5, "opt": "=cmd|' /C calc'!A0"})
    response = get(api, f"/api/sweeps/{sweep.id}/table", {"format": "csv", "sort": "param.lr"})
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    header, body = rows[0], rows[1:]
    assert header[:2] == ["run_id", "name"] and "metric.loss.last" in header
    assert [r[1] for r in body] == ["b", "a", "'=HYPERLINK()", "d", "c"]
    loss = header.index("metric.loss.last")
    assert [r[loss] for r in body] == ["0.2", "0.5", "", "", "NaN"]
    assert body[2][header.index("param.opt")].startswith("'=")


def test_ten_thousand_runs_are_paged(api):
    sweep = Sweep.objects.create(name="big")
    # Ids of our own: bulk_create skips the retry on a clash, and 10^4 random 32-bit ids
    # clash about once in a hundred runs (CI failed on one).
    runs = Run.objects.bulk_create(
        Run(
            id=f"run-big{i:05d}",
            name=f"r{i}",
            command="true",
            sweep=sweep,
            params={"lr": i / 1e4, "seed": i % 7},
        )
        for i in range(10_000)
    )
    MetricSeries.objects.bulk_create(
        MetricSeries(run=run, agent_id=run.id, key="loss", last_value=1 - i / 1e4, points=1)
        for i, run in enumerate(runs)
    )
    body = table(api, sweep, sort="metric.loss.last", limit=50, offset=100)
    assert body["total"] == 10_000 and len(body["rows"]) == 50
    assert body["rows"][0]["metrics"]["loss"]["last"] == pytest.approx(1 - 9899 / 1e4)
    assert table(api, sweep, limit=1000)["rows"].__len__() == 1000
    too_many = get(api, f"/api/sweeps/{sweep.id}/table", {"limit": 1001})
    assert too_many.status_code == 422


def test_sweeps_are_listed_and_made_and_runs_join_them(api, sweep, tmp_path):
    made = api("post", "/api/sweeps", {"name": "batch", "metrics_pattern": r"c (?P<c>\S+)"})
    assert made.status_code == 201, made.content
    new = made.json()
    assert (
        new["kind"] == "manual"
        and new["run_count"] == 0
        and new["url"] == (f"/sweeps/{new['id']}/")
    )
    run = api(
        "post",
        "/api/runs",
        {"name": "x", "command": "true", "sweep_id": new["id"], "workdir": str(tmp_path)},
    ).json()
    assert run["executor_options"] == {"metrics_pattern": r"c (?P<c>\S+)"}  # the sweep's
    listed = api("get", "/api/sweeps").json()
    assert [s["id"] for s in listed] == [new["id"], sweep.id]
    assert listed[0]["run_count"] == 1 and listed[1]["run_count"] == 4
    assert [s["id"] for s in get(api, "/api/sweeps", {"kind": "research"}).json()] == []
    bad = api("post", "/api/sweeps", {"name": "x", "metrics_pattern": "(?P<x"})
    assert bad.status_code == 422 and "does not compile" in bad.content.decode()


def test_a_new_param_is_a_column_as_soon_as_a_run_brings_or_logs_it(api, sweep):
    from scheduler_app.runs.launch import record_tracking

    assert "param.momentum" not in [c["id"] for c in table(api, sweep)["columns"]]
    run_of(sweep, "e", {"lr": 0.5, "momentum": 0.9})
    assert "param.momentum" in [c["id"] for c in table(api, sweep)["columns"]]
    first = Run.objects.get(name="a")
    record_tracking(run_id=first.pk, params={"warmup": 100}, urls={})
    body = table(api, sweep, where="param.warmup:eq:100")
    assert names(body) == ["a"]


def test_a_manual_sweeps_status_is_read_off_its_runs(api):
    made = api("post", "/api/sweeps", {"name": "by hand"}).json()
    sweep = Sweep.objects.get(pk=made["id"])

    def status():
        return api("get", "/api/sweeps").json()[0]["status"]

    assert made["status"] == "draft" and status() == "draft"
    first = run_of(sweep, "a", {}, status="running")
    run_of(sweep, "b", {}, status="failed")
    assert status() == "running"
    Run.objects.filter(pk=first.pk).update(status="done")
    assert status() == "done"  # every run ended: a failed trial is part of a sweep


def test_a_made_sweep_is_served_where_its_answer_says(api, sweep):
    made = api("post", "/api/sweeps", {"name": "served"}).json()
    assert made["api_url"] == f"/api/sweeps/{made['id']}"
    served = api("get", made["api_url"])
    assert served.status_code == 200, served.content
    assert {k: v for k, v in served.json().items() if k != "updated_at"} == {
        k: v for k, v in made.items() if k != "updated_at"
    }
    assert api("get", f"/api/sweeps/{sweep.id}").json()["run_count"] == 4
    missing = api("get", "/api/sweeps/sweep-nope")
    assert missing.status_code == 404 and "no sweep 'sweep-nope'" in missing.json()["detail"]
