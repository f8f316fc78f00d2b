"""Old metric points thinned (scheduler_app/metrics/compaction.py): what a chart of the old
steps shows stays (spikes, NaNs, ±inf, the extremes, the first and last step), the recent
points and the series' newest point stay whole, and a second pass finds nothing to do."""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import call_command

from scheduler_app.metrics.compaction import _THIN, compact_old_points
from scheduler_app.metrics.queries import series_points
from scheduler_app.metrics.series import record_rows
from scheduler_app.models import MetricPoint, MetricSeries, Run
from tests.query_plans import rows_through, stale_statistics

pytestmark = pytest.mark.django_db

NOW = time.time()
DAY = 86400.0


def _run_with_history(old: int, recent: int) -> MetricSeries:
    """A loss logged `old` steps 60 days ago (a spike at 1234, NaN at 777, +inf at 2500),
    then `recent` steps an hour ago."""
    run = Run.objects.create(name="long", command="python train.py")
    rows = []
    for step in range(old + recent):
        at = NOW - 60 * DAY + step if step < old else NOW - 3600 + step - old
        rows.append({"_step": step, "loss": 1.0 + 1.0 / (step + 1), "_timestamp": at})
    special = {1234: 50.0, 777: float("nan"), 2500: float("inf"), 3000: 0.5}  # 0.5: the lowest
    for step, value in special.items():
        if step < len(rows):
            rows[step]["loss"] = value
    record_rows(agent_id=f"executor-{run.pk}", run_id=run.pk, rows=rows)
    return MetricSeries.objects.get(run=run, key="loss")


def _points(series) -> dict[int, float]:
    return dict(MetricPoint.objects.filter(series=series).values_list("step", "value"))


def test_old_points_are_thinned_keeping_what_a_chart_shows():
    series = _run_with_history(old=5000, recent=300)
    summary_before = MetricSeries.objects.filter(pk=series.pk).values().get()
    cut = datetime.fromtimestamp(NOW - 30 * DAY, tz=UTC)

    done = compact_old_points(before=cut, stretches=50)

    kept = _points(series)
    assert done.series == 1 and done.deleted == 5300 - len(kept)
    assert len(kept) <= 50 * 4 + 2 + 300 + 1, len(kept)
    assert all(step in kept for step in range(5000, 5300))  # the last hour: whole
    assert kept[1234] == 50.0 and kept[3000] == 0.5  # the extremes
    assert math.isnan(kept[777]) and kept[2500] == math.inf  # every non-finite point
    assert 0 in kept and 4999 in kept  # the old range's first and last step
    series.refresh_from_db()
    assert series.points == len(kept)
    after = MetricSeries.objects.filter(pk=series.pk).values().get()
    for field in ("first_step", "last_step", "last_value", "min_value", "max_value"):
        assert after[field] == summary_before[field], field
    assert after["non_finite"] == summary_before["non_finite"] == 2

    chart = series_points(series, max_points=100)
    steps = dict(zip(chart["steps"], chart["values"], strict=True))
    assert steps[1234] == 50.0 and steps[777] == "NaN" and chart["points"] == len(kept)

    again = compact_old_points(before=cut, stretches=50)
    assert again.deleted == 0 and len(_points(series)) == len(kept)


def test_thinning_works_once_per_point_whatever_the_planners_statistics_say():
    """With statistics that say the table is empty, the planner ran the ranking once for
    each point: 5,000 old points took 80 s (7 s with the table merely not analyzed yet)."""
    stale_statistics(MetricPoint, lambda: _run_with_history(old=5000, recent=10))
    series = _run_with_history(old=5000, recent=10)
    cut = datetime.fromtimestamp(NOW - 30 * DAY, tz=UTC)
    params = {"series": series.pk, "before": cut, "stretches": 50}
    work = rows_through(_THIN, params)
    assert work <= 30 * 5000, work  # a few passes over the points; not 5,000 times over
    assert len(_points(series)) <= 50 * 4 + 2 + 10 + 1  # and it thinned them


def test_a_series_all_old_keeps_its_newest_point_and_a_short_one_is_left():
    whole = _run_with_history(old=3000, recent=0)
    short = _run_with_history(old=150, recent=0)
    cut = datetime.fromtimestamp(NOW - DAY, tz=UTC)

    compact_old_points(before=cut, stretches=40)

    assert 2999 in _points(whole)  # its newest point, however old
    assert len(_points(short)) == 150  # 150 points: not more than 40 stretches x 4


def test_a_stopping_runagentd_ends_the_pass_after_the_series_it_is_on():
    first, second = (_run_with_history(old=3000, recent=0) for _ in range(2))
    cut = datetime.fromtimestamp(NOW - DAY, tz=UTC)

    class StopAfterFirst:  # a threading.Event set as the first series is done
        def is_set(self):
            return len(_points(first)) < 3000

    done = compact_old_points(before=cut, stretches=40, stop=StopAfterFirst())
    assert (done.series, done.skipped) == (1, "stopped: runagentd is stopping")
    assert len(_points(first)) < 3000 and len(_points(second)) == 3000


def test_one_pass_at_a_time_and_the_command_says_what_it_did(capsys):
    from django.db import connections

    series = _run_with_history(old=3000, recent=0)
    other = connections.create_connection("default")  # another runagentd's pass, going on
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s)", [0x4D455452])
        blocked = compact_old_points(before=datetime.now(UTC) - timedelta(days=1), stretches=10)
        assert blocked.skipped == "another compaction is running" and blocked.deleted == 0
        with other.cursor() as cursor:  # unlocked before the close: a backend ends later
            cursor.execute("SELECT pg_advisory_unlock(%s)", [0x4D455452])
    finally:
        other.close()
    call_command("metrics", "compact", "--older-than-days", "1", "--stretches", "10")
    said = capsys.readouterr().out
    assert len(_points(series)) <= 10 * 4 + 2 + 1
    assert "Thinned 1 metric series" in said and "points deleted" in said


@pytest.mark.django_db(transaction=True)
def test_runagentd_thins_old_points_when_the_setting_asks():
    from hosts_app.models import Host
    from tests.helpers import wait_until
    from tests.runtime_harness import DaemonProcess

    series = _run_with_history(old=10_000, recent=100)  # over 2,000 stretches x 4
    untouched = _run_with_history(old=10_000, recent=0)
    # A daemon without the setting leaves everything, heartbeat after heartbeat.
    keeper = DaemonProcess("keeps-points", AGENTSYS_GPUS="")
    first = Host.objects.get(name="keeps-points").last_heartbeat
    wait_until(
        lambda: Host.objects.get(name="keeps-points").last_heartbeat > first, 30, 0.2, "a beat"
    )
    keeper.stop()
    assert len(_points(series)) == 10_100
    daemon = DaemonProcess(
        "thins-points", AGENTSYS_GPUS="", AGENTSYS_METRICS_COMPACT_AFTER_DAYS="30"
    )
    try:
        # Its first heartbeat starts a pass.
        wait_until(lambda: len(_points(series)) < 10_100, 30, 0.2, "the old points thinned")
    finally:
        daemon.stop()
    kept = _points(series)
    assert kept[1234] == 50.0 and math.isnan(kept[777]) and kept[3000] == 0.5
    assert all(step in kept for step in range(10_000, 10_100))
    assert 9_999 in _points(untouched)  # its newest point
    assert MetricSeries.objects.get(pk=series.pk).points == len(kept)
