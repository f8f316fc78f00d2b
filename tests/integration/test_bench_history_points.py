"""bench/scale_history.py's figures time what their names say (issue 40 §3), at a tiny size on
the real parts (PostgreSQL through the test database, daphne, Chromium), checked against the
statements PostgreSQL was sent, the calls the test watched and the browser's own timings:

- the populate figures from before their first write to their last statement (ANALYZE,
  VACUUM ANALYZE) done, every row written and committed inside;
- the one-writer figures from before the first write call to the last one's return, nothing
  but those calls timed (the run and the rows to store made before the clock starts);
- event_replay_1e7_p99_ms from just before the batch read to its last message made;
- the GET figures from just before their GET to its answer, the warming one untimed;
- sweep_table_page_100000_runs_ms from the navigation's start (just before the page's
  request) to the table and chart drawn, after the table's data arrived.

context_p95_ms_1e7 and memory_write_p50_ms_1e7 are bench/memory.py's functions at 10^7
(test_bench_memory_points.py checks them); here, what memory_figures prints from them."""

from __future__ import annotations

import random
import statistics
import time

import httpx
import pytest
from playwright.sync_api import Page

import bench.harness
from bench import scale_history, scale_writes, ui
from bench._report import percentile
from bench.spans import median_ms, per_s, percentile_ms, span_ms, span_s
from events_app import events, selectors
from events_app.models import Event
from memory_app import context, services
from memory_app.models import MemoryEntry
from scheduler_app.metrics import series
from scheduler_app.models import MetricPoint, Run
from tests.call_watch import watch_calls
from tests.live_clients import TOKEN
from tests.sql_watch import bounds_ms, committed_by, statements, watch_commits

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
EVENTS = 1200
RUNS, POINTS, CHART = 100, 1000, 500  # 10 series of 50 points, and the big run's 500 + 1


@pytest.fixture(autouse=True)
def _live_events_in_memory(memory_channel_layer):
    """record_event publishes each event live as it returns: to a layer in this process (the
    configured one is on the real database, not the test one)."""


def _all_inside(span, sent, commits) -> None:
    """Every statement sent begun inside the span and committed before it ended."""
    assert sent
    assert all(span.began <= s.began and committed_by(s, commits) <= span.ended for s in sent)


def _only_the_calls(span, calls, sent) -> None:
    """The calls begun and returned inside the span, and every statement in it theirs."""
    assert span.began <= calls[0].began and calls[-1].returned <= span.ended
    inside = [s for s in sent if span.began <= s.began <= span.ended]
    assert all(any(c.began <= s.began and s.ended <= c.returned for c in calls) for s in inside)


def test_memory_figures_print_the_spans_of_the_memory_bench(monkeypatch):
    figures = {}
    monkeypatch.setattr(
        scale_history, "report", lambda name, value, _: figures.update({name: value})
    )
    monkeypatch.setattr(scale_history, "SAMPLES", 5)
    assembles = watch_calls(monkeypatch, context, "assemble_context")
    writes = watch_calls(monkeypatch, services, "write_entry")
    opened = time.time()
    with statements() as sent:
        scale_history.memory_figures(entries=2000)
    # The populate figure: from before the TRUNCATE to the ANALYZE done.
    truncate, insert, analyze = sent[:3]
    assert [s.sql.split()[0] for s in sent[:3]] == ["TRUNCATE", "INSERT", "ANALYZE"]
    assert insert.rows == 2000 and insert.autocommit
    assert analyze.ended - truncate.began <= figures["populate_1e7_entries_s"]
    assert figures["populate_1e7_entries_s"] <= assembles[0].began - opened
    assert len(assembles) == 20 + 5  # warming ones, untimed
    least, most = bounds_ms(assembles, 20, opened)
    assert percentile(least, 95) <= figures["context_p95_ms_1e7"] <= percentile(most, 95)
    least, most = bounds_ms(writes, 0, assembles[-1].returned)
    assert percentile(least, 50) <= figures["memory_write_p50_ms_1e7"] <= percentile(most, 50)
    assert MemoryEntry.objects.count() == 2000 + 5


def test_populate_events_runs_to_the_table_analysed_and_a_replay_to_its_last_message(
    monkeypatch,
):
    records = watch_calls(monkeypatch, events, "record_event")
    commits = watch_commits(monkeypatch)
    with statements() as sent:
        span = scale_history.populate_events(EVENTS)
    # Start: before the first of the events (the one the others are cloned from) is written.
    [first] = records
    assert span.began <= first.began
    _all_inside(span, sent, commits)
    assert sorted(Event.objects.values_list("seq", flat=True)) == list(range(1, EVENTS + 1))
    # End: the table analysed for the replay's reads.
    assert sent[-1].sql == "ANALYZE agents_app_event" and sent[-1].ended <= span.ended
    assert span_s(span) == pytest.approx(span.ended - span.began)
    _replays_run_from_the_read_to_the_last_message(monkeypatch)


def _replays_run_from_the_read_to_the_last_message(monkeypatch) -> None:
    reads = watch_calls(monkeypatch, selectors, "events_after")
    made = watch_calls(monkeypatch, Event, "as_message")
    opened = time.time()
    with statements() as sent:
        spans = scale_history.replay_spans(EVENTS, random.Random(10), samples=4, warm=2)
    assert len(reads) == 2 + 4
    assert reads[1].returned < spans[0].began  # the warming reads untimed
    warming_made = made[: len(reads[0].result) + len(reads[1].result)]
    assert all(m.returned < spans[0].began for m in warming_made)
    for span, read in zip(spans, reads[2:], strict=True):
        # Start: just before the read; its statement, the only one timed, sent inside it.
        _only_the_calls(span, [read], sent)
        assert len(read.result) == min(500, EVENTS - read.kwargs["after_seq"]) > 0
        # End: after the last of its messages was made.
        messages = [m for m in made if span.began <= m.began <= span.ended]
        assert len(messages) == len(read.result)
        assert max(m.returned for m in messages) <= span.ended
    least, most = bounds_ms(reads, 2, opened)
    assert percentile(least, 99) <= percentile_ms(spans, 99) <= percentile(most, 99)


def test_events_one_writer_runs_from_the_first_record_to_the_last_return(monkeypatch):
    calls = watch_calls(monkeypatch, events, "record_event")
    commits = watch_commits(monkeypatch)
    with statements() as sent:
        span = scale_writes.events_one_writer(40)
    assert len(calls) == Event.objects.count() == 40
    _only_the_calls(span, calls, sent)
    _all_inside(span, sent, commits)
    assert per_s(40, span) == pytest.approx(40 / span_s(span))
    assert per_s(40, span) <= 40 / (calls[-1].returned - calls[0].began)


def test_metric_points_one_writer_times_the_stores_and_not_the_rows_made(monkeypatch):
    calls = watch_calls(monkeypatch, series, "record_rows")
    made = watch_calls(monkeypatch, scale_writes, "metric_rows")
    commits = watch_commits(monkeypatch)
    with statements() as sent:
        span = scale_writes.points_one_writer(batches=3, rows=200)
    [run_made] = [s for s in sent if s.sql.startswith('INSERT INTO "scheduler_app_run"')]
    # Start: the run and its rows made, before the first batch is stored.
    assert run_made.ended <= span.began and max(m.returned for m in made) <= span.began
    assert [c.kwargs["rows"] for c in calls] == [m.result for m in made]
    assert len(calls) == 3 and [len(c.kwargs["rows"]) for c in calls] == [200] * 3
    _only_the_calls(span, calls, sent)
    # End: the last batch's transaction committed, every point stored.
    assert all(any(c.began <= t.began and t.returned <= c.returned for t in commits) for c in calls)
    assert MetricPoint.objects.count() == 600
    assert per_s(600, span) <= 600 / (calls[-1].returned - calls[0].began)


def test_memory_one_writer_runs_from_the_first_write_to_the_last_return(monkeypatch):
    calls = watch_calls(monkeypatch, services, "write_entry")
    commits = watch_commits(monkeypatch)
    with statements() as sent:
        span = scale_writes.memory_one_writer(30)
    assert len(calls) == MemoryEntry.objects.count() == 30
    _only_the_calls(span, calls, sent)
    _all_inside(span, sent, commits)


def test_populate_runs_from_before_the_first_run_to_the_points_vacuumed(monkeypatch):
    commits = watch_commits(monkeypatch)
    with statements() as sent:
        big_run, span = scale_history.populate_runs(RUNS, POINTS, CHART)
    # Start: before the first run is written; every write inside, committed there.
    assert sent[0].sql.startswith('INSERT INTO "scheduler_app_run"')
    _all_inside(span, sent, commits)
    assert Run.objects.count() == RUNS
    assert MetricPoint.objects.count() == POINTS + 1
    assert MetricPoint.objects.filter(series__run_id=big_run).count() == CHART + 1
    # End: the points' indexes rebuilt and the whole database vacuumed and analysed.
    assert sent[-1].sql == "VACUUM ANALYZE" and sent[-1].ended <= span.ended


@pytest.fixture
def sweep_id(site, monkeypatch):
    """bench.ui's sweep of 60 runs, and bench.ui's token the test web's."""
    monkeypatch.setattr(bench.harness, "TOKEN", TOKEN)
    return scale_history.seed_sweep(60)


def _gets_timed(times_ms, gets, opened) -> None:
    """Each time (ms) at least its GET and at most from the GET before it returned to the
    one after it sent: each timed the one GET, from before it was sent to its answer."""
    least, most = bounds_ms(gets, len(gets) - len(times_ms), opened)
    assert all(lo <= t <= hi for lo, t, hi in zip(least, times_ms, most, strict=True))


def test_sweep_table_api_times_each_get_of_the_table_after_a_warming_one(
    site, sweep_id, monkeypatch
):
    url, _ = site
    gets = watch_calls(monkeypatch, httpx, "get")
    rounds = watch_calls(monkeypatch, ui, "sweep_api_figure")
    opened = time.time()
    figure = scale_history.sweep_api_ms(url, sweep_id, 60)
    [measured] = rounds
    assert len(gets) == ui.ROUNDS + 1
    for get in gets:
        assert get.result.request.url.path == f"/api/sweeps/{sweep_id}/table"
        assert get.kwargs["params"]["sort"] == "-metric.m2.last" and "where" in get.kwargs["params"]
        assert get.result.json()["run_count"] == 60
    _gets_timed(measured.result, gets, opened)
    assert figure == statistics.median(measured.result)


def test_sweep_page_runs_from_the_navigation_to_the_table_and_chart_drawn(
    site, sweep_id, monkeypatch
):
    url, page = site
    gotos = watch_calls(monkeypatch, Page, "goto")
    waits = watch_calls(monkeypatch, Page, "wait_for_function")
    finished = []
    page.on("requestfinished", lambda request: finished.append(request))
    draws = scale_history.sweep_page_draws(page, url, sweep_id, rounds=2)
    assert len(draws) == len(gotos) == len(waits) == 2
    timings = [(r.url.split("?")[0], r.timing) for r in finished]
    nexts = [d.origin for d in draws[1:]] + [float("inf")]
    for draw, goto, wait, later in zip(draws, gotos, waits, nexts, strict=True):
        mine = {u: t for u, t in reversed(timings) if draw.origin <= t["startTime"] < later}
        document = mine[f"{url}/sweeps/{sweep_id}/"]
        table = mine[f"{url}/api/sweeps/{sweep_id}/table"]
        # Start: the navigation goto began, just before the page's own request.
        assert goto.began * 1000 - 5 <= draw.origin <= document["startTime"]
        # End: marked after the table's data had arrived, before the bench saw the mark.
        assert table["startTime"] + table["responseEnd"] <= draw.origin + draw.ready
        assert draw.origin + draw.ready <= wait.returned * 1000 + 5
    assert page.evaluate("document.body.dataset.sweepRows") == "50"  # a page of the table
    assert page.locator("#sweep-svg path.line").count() == 50  # and the chart
    assert ui.median_ms(draws) == statistics.median(d.ready for d in draws)


def test_runs_list_and_run_chart_time_each_get_after_a_warming_one(site, monkeypatch):
    url, page = site
    big_run, _ = scale_history.populate_runs(RUNS, POINTS, CHART)
    gets = watch_calls(monkeypatch, httpx.Client, "get")
    cookies = {c["name"]: c["value"] for c in page.context.cookies()}
    opened = time.time()
    listed = scale_history.runs_list_spans(url, cookies, samples=3)
    assert len(gets) == 1 + 3
    for get in gets:
        # The list page of a logged-in person, newest first, not the login page it redirects to.
        assert (get.result.status_code, get.result.url.path) == (200, "/runs/")
        assert get.result.text.index("template") < get.result.text.index("the long one")
    _gets_timed([span_ms(s) for s in listed], gets, opened)
    assert median_ms(listed) == statistics.median(span_ms(s) for s in listed)

    gets.clear()
    opened = time.time()
    charted = scale_history.run_chart_spans(url, TOKEN, big_run, samples=2)
    assert len(gets) == 1 + 2
    for get in gets:
        assert get.result.url.path == f"/api/runs/{big_run}/metrics"
        [loss] = get.result.json()["series"]
        assert loss["key"] == "loss"
    _gets_timed([span_ms(s) for s in charted], gets, opened)
    assert median_ms(charted) == statistics.median(span_ms(s) for s in charted)
