"""Run metrics as series (issue 12 item 1): rows become points by key and step, NaN kept; the
API downsamples so that spikes and NaNs survive; old metrics memory entries migrate."""

import math

import pytest

from memory_app.models import MemoryEntry
from runtime_app.run_port import DjangoRunPort
from scheduler_app.metrics.queries import series_points
from scheduler_app.metrics.series import record_rows
from scheduler_app.models import MetricPoint, MetricSeries, Run
from tests.helpers import migrate
from tests.query_plans import rows_through, stale_statistics

pytestmark = pytest.mark.django_db


def make_run(name="r") -> Run:
    return Run.objects.create(name=name, command="python train.py")


def series(run, key) -> MetricSeries:
    return MetricSeries.objects.get(run=run, key=key)


def points(run, key) -> list[tuple[int, float]]:
    rows = MetricPoint.objects.filter(series=series(run, key)).order_by("step", "id")
    return list(rows.values_list("step", "value"))


def test_each_numeric_field_becomes_a_series_by_step():
    run = make_run()
    rows = [
        {"_step": 0, "loss": 2.0, "lr": 0.1, "phase": "warmup", "_timestamp": 1.7e9},
        {"_step": 1, "loss": float("nan"), "ok": True, "lr": 0.1},
        {"_step": 2, "loss": 1.5, "lr": 0.05, "eval/acc": 3},
    ]
    stored = record_rows(agent_id="executor-a", run_id=run.pk, rows=rows)
    assert stored == 7  # 3 loss + 3 lr + 1 eval/acc; strings, bools and _fields are not series
    assert sorted(MetricSeries.objects.filter(run=run).values_list("key", flat=True)) == [
        "eval/acc",
        "loss",
        "lr",
    ]
    loss = points(run, "loss")
    assert [s for s, _ in loss] == [0, 1, 2] and math.isnan(loss[1][1])
    summary = series(run, "loss")
    assert (summary.points, summary.first_step, summary.last_step) == (3, 0, 2)
    assert (summary.last_value, summary.min_value, summary.max_value) == (1.5, 1.5, 2.0)
    assert summary.non_finite == 1
    first = MetricPoint.objects.filter(series=summary, step=0).get()
    assert first.time.timestamp() == 1.7e9  # the row's own _timestamp


def test_rows_without_a_step_continue_their_series_across_batches():
    run = make_run()
    record_rows(agent_id="executor-b", run_id=run.pk, rows=[{"loss": 3.0}, {"loss": 2.0}])
    record_rows(agent_id="executor-b", run_id=run.pk, rows=[{"loss": 1.0}])
    assert points(run, "loss") == [(0, 3.0), (1, 2.0), (2, 1.0)]
    assert series(run, "loss").last_value == 1.0


def test_the_fields_of_a_row_without_a_step_share_one_step():
    # Trainer-shaped rows: the eval row's own keys are new, but its `epoch` is not: one step
    # for the whole row, past each of its series, so nothing is charted out of line.
    run = make_run()
    rows = [
        {"loss": 0.69, "learning_rate": 1e-4, "epoch": 0.5},
        {"loss": 0.52, "learning_rate": 8e-5, "epoch": 1.0},
        {"eval_loss": 0.55, "epoch": 1.0},
    ]
    record_rows(agent_id="executor-c", run_id=run.pk, rows=rows[:2])
    record_rows(agent_id="executor-c", run_id=run.pk, rows=rows[2:])
    assert [s for s, _ in points(run, "loss")] == [0, 1]
    assert [s for s, _ in points(run, "learning_rate")] == [0, 1]
    assert [s for s, _ in points(run, "epoch")] == [0, 1, 2]
    assert points(run, "eval_loss") == [(2, 0.55)]


def test_an_executor_with_no_run_still_keeps_its_series():
    assert record_rows(agent_id="executor-c", run_id="", rows=[{"step": 5, "loss": 1}]) == 1
    assert MetricSeries.objects.get(agent_id="executor-c").run is None


def test_the_run_port_stores_metrics_as_series_not_memory_entries():
    run = make_run()
    runs = DjangoRunPort("executor-d", run.pk)
    assert runs.write_metrics(rows=[{"_step": i, "loss": 1.0 / (i + 1)} for i in range(10)]) == 10
    assert series(run, "loss").points == 10
    assert not MemoryEntry.objects.filter(type="metrics").exists()


def _long_series(run, n, spikes=(), nans=()):
    rows = [{"_step": i, "loss": 1.0} for i in range(n)]
    for step in spikes:
        rows[step]["loss"] = 50.0
    for step in nans:
        rows[step]["loss"] = float("nan")
    record_rows(agent_id=f"executor-{run.pk}", run_id=run.pk, rows=rows)
    return series(run, "loss")


def test_downsampling_keeps_a_one_step_spike_and_every_nan():
    run = make_run()
    loss = _long_series(run, 20_000, spikes=[12_345], nans=[777, 19_999])
    found = series_points(loss, max_points=200)
    assert found["downsampled"] and found["points"] == 20_000
    assert found["returned"] <= 200 + 2  # two buckets also send their NaN
    by_step = dict(zip(found["steps"], found["values"], strict=True))
    assert by_step[12_345] == 50.0
    assert by_step[777] == "NaN" and by_step[19_999] == "NaN"
    assert found["steps"] == sorted(found["steps"])
    assert found["min_value"] == 1.0 and found["max_value"] == 50.0


def test_downsampling_reads_the_index_alone():
    """A chart's buckets come from the (series, step) index, which holds the values: read
    through the heap, a series of 10^6 among 10^8 points took the planner to a table scan."""
    from django.db import connection

    from scheduler_app.metrics.queries import _BUCKETED

    run = make_run()
    record_rows(agent_id="executor-a", run_id=run.pk, rows=[{"_step": 1, "loss": 1.0}])
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")  # a test table is too small to tell
        cursor.execute("SET LOCAL enable_bitmapscan = off")
        arguments = {"series": series(run, "loss").pk, "since": 0, "buckets": 10}
        cursor.execute("EXPLAIN " + _BUCKETED, arguments)
        plan = "\n".join(line for (line,) in cursor.fetchall())
    assert "Index Only Scan using metric_point_step_value_idx on scheduler_app_metricpoint" in plan
    assert "Index Scan" not in plan  # no step of it reads the heap for the values


def test_a_chart_reads_each_point_once_whatever_the_planners_statistics_say():
    """Statistics that say the points table is empty (analyzed after its rows went, before
    new ones came) led the planner to compute the series' bounds once for each point: 20,000
    points took 84 s, not 16 ms (400 million rows read)."""
    from scheduler_app.metrics.queries import _BUCKETED

    stale_statistics(MetricPoint, lambda: _long_series(make_run("gone"), 20_000))
    loss = _long_series(make_run(), 20_000, spikes=[12_345], nans=[777])
    read = rows_through(_BUCKETED, {"series": loss.pk, "since": -(2**63), "buckets": 100})
    assert read <= 10 * 20_000, read  # the points, sorted, in buckets; not 20,000 times over


def test_a_short_series_comes_whole_and_since_step_gives_the_tail():
    run = make_run()
    loss = _long_series(run, 50, nans=[10])
    whole = series_points(loss, max_points=100)
    assert not whole["downsampled"] and whole["steps"] == list(range(50))
    assert whole["values"][10] == "NaN"
    tail = series_points(loss, since_step=45, max_points=100)
    assert tail["steps"] == [45, 46, 47, 48, 49]


# -- the API -----------------------------------------------------------------------------------


def test_run_metrics_api(api):
    run = make_run()
    _long_series(run, 5000, spikes=[4321])
    record_rows(agent_id=f"executor-{run.pk}", run_id=run.pk, rows=[{"_step": 5000, "lr": 0.1}])
    body = api("get", f"/api/runs/{run.pk}/metrics?max_points=100").json()
    assert [s["key"] for s in body["series"]] == ["loss", "lr"]
    loss = body["series"][0]
    assert loss["downsampled"] and loss["returned"] <= 100 and 4321 in loss["steps"]
    only_lr = api("get", f"/api/runs/{run.pk}/metrics?keys=lr").json()
    assert [s["key"] for s in only_lr["series"]] == ["lr"]
    tail = api("get", f"/api/runs/{run.pk}/metrics?keys=loss&since_step=4998").json()
    assert tail["series"][0]["steps"] == [4998, 4999]


def test_compare_overlays_one_key_of_several_runs(api):
    a, b, c = make_run("a"), make_run("b"), make_run("c")
    _long_series(a, 10)
    _long_series(b, 20)
    body = api("get", f"/api/runs/metrics?ids={a.pk},{b.pk},{c.pk}&key=loss").json()
    assert [(r["run_id"], r["name"]) for r in body["runs"]] == [
        (a.pk, "a"),
        (b.pk, "b"),
        (c.pk, "c"),
    ]
    assert [len(r["series"]["steps"]) for r in body["runs"][:2]] == [10, 20]
    assert body["runs"][2]["series"] is None  # c never logged a loss


@pytest.mark.parametrize(
    ("url", "status", "detail"),
    [
        ("/api/runs/run-missing/metrics", 404, "no run"),
        ("/api/runs/metrics?ids=run-missing&key=loss", 400, "no run 'run-missing'"),
        ("/api/runs/metrics?ids=,&key=loss", 400, "at least one run"),
        ("/api/runs/metrics?ids=a&key=", 422, "key"),
        ("/api/runs/metrics?ids=" + ",".join(f"r{i}" for i in range(51)) + "&key=l", 400, "50"),
        ("/api/runs/RUN/metrics?max_points=1", 422, "max_points"),
        ("/api/runs/RUN/metrics?since_step=abc", 422, "since_step"),
    ],
)
def test_bad_metrics_requests_are_explained(api, url, status, detail):
    run = make_run()
    response = api("get", url.replace("RUN", run.pk))
    assert response.status_code == status, response.content
    assert detail in str(response.json()["detail"])


def test_metrics_need_credentials(client):
    run = make_run()
    assert client.get(f"/api/runs/{run.pk}/metrics").status_code == 401


# -- the migration -----------------------------------------------------------------------------


@pytest.fixture
def latest_schema_after():
    yield
    migrate()  # the tests after this one need every migration applied


def _migrate(targets):
    return migrate(targets)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_metrics_memory_entries_become_series(latest_schema_after):
    old = _migrate(
        [("scheduler_app", "0006_metric_series"), ("memory_app", "0002_memory_query_indexes")]
    )
    Entry = old.get_model("memory_app", "MemoryEntry")
    OldRun = old.get_model("scheduler_app", "Run")
    run = OldRun.objects.create(id="run-old", name="old", command="true")
    for step, loss in enumerate([3.0, "NaN", 1.0]):
        Entry.objects.create(
            key=f"k{step}",
            type="metrics",
            project="p",
            agent_id="executor-old",
            run=run.pk,
            data={"_step": step, "loss": loss},
        )
    Entry.objects.create(key="keep", type="reflection", project="p", data={"text": "kept"})
    new = _migrate([("scheduler_app", "0007_metrics_out_of_memory")])
    migrated = new.get_model("scheduler_app", "MetricSeries").objects.get(
        run_id="run-old", key="loss"
    )
    assert (migrated.points, migrated.last_value, migrated.non_finite) == (3, 1.0, 1)
    points_then = new.get_model("scheduler_app", "MetricPoint").objects.filter(series=migrated)
    values = list(points_then.order_by("step").values_list("value", flat=True))
    assert values[0] == 3.0 and math.isnan(values[1]) and values[2] == 1.0
    assert list(MemoryEntry.objects.values_list("key", flat=True)) == ["keep"]


def test_a_series_belongs_to_the_source_that_wrote_it_first():
    """A script that logs loss to TensorBoard and prints it too: one loss curve, not each
    point twice; a metric only the second source has still becomes its series."""
    run = make_run()
    record_rows(agent_id="executor-s", run_id=run.pk, rows=[{"_step": 1, "loss": 2.0}])
    stored = record_rows(
        agent_id="executor-s",
        run_id=run.pk,
        rows=[{"_step": 1, "loss": 2.0, "lr": 0.1}, {"_step": 2, "loss": 1.0, "lr": 0.1}],
        source="stdout",
    )
    assert stored == 2  # the two lr points
    assert points(run, "loss") == [(1, 2.0)]
    assert series(run, "loss").source == "jsonl" and series(run, "lr").source == "stdout"
    record_rows(agent_id="executor-s", run_id=run.pk, rows=[{"_step": 2, "loss": 1.5}])
    assert points(run, "loss") == [(1, 2.0), (2, 1.5)]


def test_printed_lines_give_way_to_a_structured_logger_that_flushes_later():
    run = make_run()
    printed = [{"_step": 1, "loss": 2.0}, {"_step": 2, "loss": 1.5}]
    record_rows(agent_id="executor-p", run_id=run.pk, rows=printed, source="stdout")
    assert series(run, "loss").source == "stdout" and series(run, "loss").points == 2
    logged = [{"_step": 1, "loss": 2.01}, {"_step": 2, "loss": 1.49}, {"_step": 3, "loss": 1.2}]
    record_rows(agent_id="executor-p", run_id=run.pk, rows=logged, source="tensorboard")
    assert points(run, "loss") == [(1, 2.01), (2, 1.49), (3, 1.2)]
    loss = series(run, "loss")
    assert (loss.source, loss.points, loss.first_step, loss.last_value) == (
        "tensorboard",
        3,
        1,
        1.2,
    )
    record_rows(
        agent_id="executor-p", run_id=run.pk, rows=[{"_step": 4, "loss": 9.0}], source="stdout"
    )
    assert series(run, "loss").points == 3  # printed lines no longer feed it
