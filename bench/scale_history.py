"""History at a lab's scale (issue 40 §2), each on a throw-away AgentSys (bench.harness) whose
tables are filled inside PostgreSQL (generate_series over a template row the product wrote):

- context_p95_ms_1e7, memory_write_p50_ms_1e7: memory_app.context.assemble_context for a
  run's executor (token budget 4,000) and a memory write, at 10^7 entries spread as agents
  write them (bench.memory_data; goals ≤ 20 and ≤ 2).
- sweep_table_api_100000_runs_ms: GET /api/sweeps/{id}/table of a sweep of 10^5 runs (10
  params, 5 metrics each), sorted by a metric and filtered by a metric's range (≤ 300); and
  sweep_table_page_100000_runs_ms: its page in Chromium, request to table and chart drawn
  (≤ 1,000).
- runs_list_1e6_ms: GET /runs/ (a logged-in person's list page, the newest first) with 10^6
  runs and 10^8 metric points stored (≤ 500); run_chart_1e6_points_ms: GET
  /api/runs/{id}/metrics of a run of 10^6 points among them, the chart's data (≤ 500).
- event_replay_1e7_p99_ms: a client resuming the agent feed after a random id, with 10^7
  events stored: the first batch read (events_app.selectors.events_after, as the WebSocket
  and SSE replay read it), p99 (≤ 50).

- events_per_s_one_writer, metric_points_per_s_one_writer, memory_writes_per_s_one_writer:
  what one writer gets from one PostgreSQL (docs/scaling.md reasons from them).

`python bench/scale.py history [writes|memory|sweep|runs|events]`: one part, or all (about 25 min;
10^8 points take most of it).
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._report import percentile, report
from bench.memory import _timed

SAMPLES = 200
RUNS_1E6 = 1_000_000
POINTS_1E8 = 100_000_000
CHART_POINTS = 1_000_000
EVENTS_1E7 = 10_000_000
SWEEP_1E5 = 100_000


def clone_rows(table: str, key: str, template, n: int, values: dict[str, str]) -> None:
    """Insert `n` copies of `table`'s row whose `key` is `template`, column by column as it
    is except `values` (SQL expressions of the copy's number `i`, 1..n), in one statement."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = %s "
            "ORDER BY ordinal_position",
            [table],
        )
        columns = [name for (name,) in cursor.fetchall()]
        picked = [values.get(column, f't."{column}"') for column in columns]
        names = ", ".join(f'"{column}"' for column in columns)
        cursor.execute(
            f'INSERT INTO "{table}" ({names}) SELECT {", ".join(picked)} '  # noqa: S608
            f'FROM "{table}" t, generate_series(1, %s) i WHERE t."{key}" = %s',
            [n, template],
        )


def memory_figures() -> None:
    from bench.memory import _fresh_table
    from bench.memory_data import World
    from memory_app.context import assemble_context
    from memory_app.services import write_entry

    world = World(10_000_000)
    report("populate_1e7_entries_s", _fresh_table(world), "s")
    rng = random.Random(7)

    def assemble():
        agent_id, scope = world.run_agent(rng)
        assemble_context(agent_id=agent_id, scope=scope, token_budget=4000)

    def write():
        agent_id, scope = world.run_agent(rng)
        write_entry(type="metrics", agent_id=agent_id, role="executor", data={"loss": 1.0}, **scope)

    _timed(assemble, 20)  # warm the cache
    report("context_p95_ms_1e7", percentile(_timed(assemble, SAMPLES), 95), "ms")
    report("memory_write_p50_ms_1e7", percentile(_timed(write, SAMPLES), 50), "ms")


def sweep_figures(system, base: str) -> None:
    from django.db import connection

    from bench import ui

    sweep_id = ui.seed_sweep(SWEEP_1E5)
    with connection.cursor() as cursor:  # as autovacuum would after 10^5 new runs
        cursor.execute("ANALYZE")
    api = statistics.median(ui.sweep_api_figure(base, sweep_id, runs=SWEEP_1E5))
    report("sweep_table_api_100000_runs_ms", api, "ms")
    with _browser(base) as page:
        drawn = []
        for _ in range(ui.ROUNDS):
            page.goto(f"{base}/sweeps/{sweep_id}/")
            page.wait_for_function("() => document.body.dataset.sweepDrawnAt", timeout=60_000)
            drawn.append(float(page.evaluate("document.body.dataset.sweepDrawnAt")))
    report("sweep_table_page_100000_runs_ms", statistics.median(drawn), "ms")


class _browser:
    """A logged-in Chromium page on `base` (bench.ui's bench user)."""

    def __init__(self, base: str):
        self.base = base

    def __enter__(self):
        from playwright.sync_api import sync_playwright

        from bench import ui

        self.playwright = sync_playwright().start()
        self.browser = self.playwright.chromium.launch(
            executable_path="/usr/bin/chromium", headless=True, args=["--no-sandbox"]
        )
        return ui.logged_in_page(self.browser, self.base)

    def __exit__(self, *exc):
        self.browser.close()
        self.playwright.stop()


def seed_runs_and_points() -> str:
    """10^6 runs over a year, one series each for a tenth of them (990 points each) and one
    run of 10^6 points: 10^8 points in all. Returns the big run's id."""
    from django.db import connection

    from scheduler_app.metrics.series import record_rows
    from scheduler_app.models import MetricSeries, Run, RunStatus

    big = Run.objects.create(name="the long one", command="python train.py", status="done")
    record_rows(agent_id="executor-big", run_id=big.pk, rows=[{"_step": 0, "loss": 1.0}])
    template = Run.objects.create(name="template", command="python train.py", status="done")
    series = MetricSeries.objects.create(run=template, agent_id="executor-t", key="loss")
    statuses = ", ".join(f"'{s}'" for s in (RunStatus.DONE, RunStatus.FAILED, RunStatus.STOPPED))
    clone_rows(
        "scheduler_app_run",
        "id",
        template.pk,
        RUNS_1E6 - 2,
        {
            "id": "'run-h' || lpad(to_hex(i), 8, '0')",
            "name": "'trial ' || i",
            "status": f"(ARRAY[{statuses}])[1 + i %% 3]",
            "created_at": "now() - interval '365 days' + i * interval '31 seconds'",
        },
    )
    series_count = RUNS_1E6 // 10
    per_series = (POINTS_1E8 - CHART_POINTS) // series_count
    clone_rows(
        "scheduler_app_metricseries",
        "id",
        series.pk,
        series_count,
        {
            "id": f"{series.pk} + i",
            "agent_id": "'executor-h' || i",
            "run_id": "'run-h' || lpad(to_hex(i * 10 - 9), 8, '0')",
            "points": str(per_series),
            "last_step": str(per_series - 1),
        },
    )
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT setval(pg_get_serial_sequence('scheduler_app_metricseries', 'id'), %s)",
            [series.pk + series_count],
        )
        cursor.execute("SET maintenance_work_mem = '1GB'")
        # The points' indexes built once, after the rows: ~3x faster than kept up row by row.
        cursor.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = "
            "'scheduler_app_metricpoint' AND indexname NOT LIKE '%%pkey'"
        )
        indexes = cursor.fetchall()
        for name, _ in indexes:
            cursor.execute(f'DROP INDEX "{name}"')
        big_series = MetricSeries.objects.get(run=big).pk
        cursor.execute(
            "INSERT INTO scheduler_app_metricpoint (series_id, step, value, time) "
            "SELECT %s, i, 1.0 / (1 + i), now() FROM generate_series(1, %s) i",
            [big_series, CHART_POINTS],
        )
        cursor.execute(
            "INSERT INTO scheduler_app_metricpoint (series_id, step, value, time) "
            "SELECT %s + s, i, 1.0 / (1 + i), now() "
            "FROM generate_series(1, %s) s, generate_series(0, %s) i",
            [series.pk, series_count, per_series - 1],
        )
        for _, definition in indexes:
            cursor.execute(definition)
        cursor.execute(
            "UPDATE scheduler_app_metricseries SET points = %s, last_step = %s WHERE id = %s",
            [CHART_POINTS + 1, CHART_POINTS, big_series],
        )
        cursor.execute("VACUUM ANALYZE")  # as autovacuum does after many inserts
    return big.pk


def _report_sizes(table: str, name: str) -> None:
    """The table's rows and its indexes on disk, in GB (what a day of writes adds)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_table_size(%s::regclass), pg_indexes_size(%s::regclass)", [table, table]
        )
        rows, indexes = cursor.fetchone()
    report(f"{name}_table_gb", rows / 1e9, "GB")
    report(f"{name}_indexes_gb", indexes / 1e9, "GB")


def runs_figures(base: str) -> None:
    import httpx

    from bench.harness import TOKEN

    started = time.monotonic()
    big_run = seed_runs_and_points()
    report("populate_1e6_runs_1e8_points_s", time.monotonic() - started, "s")
    _report_sizes("scheduler_app_metricpoint", "metric_points_1e8")
    with _browser(base) as page:
        cookies = {c["name"]: c["value"] for c in page.context.cookies()}
    with httpx.Client(base_url=base, cookies=cookies, timeout=60) as client:
        listed = _timed(lambda: client.get("/runs/").raise_for_status(), 11)[1:]
    report("runs_list_1e6_ms", statistics.median(listed), "ms")
    with httpx.Client(base_url=base, headers={"X-Auth-Token": TOKEN}, timeout=60) as client:
        chart = _timed(lambda: client.get(f"/api/runs/{big_run}/metrics").raise_for_status(), 6)
    report("run_chart_1e6_points_ms", statistics.median(chart[1:]), "ms")


def event_figures() -> None:
    from django.db import connection

    from events_app.events import AGENTS_STREAM, record_event
    from events_app.selectors import events_after

    template = record_event(stream=AGENTS_STREAM, kind="note", agent_id="executor-x", payload={})
    started = time.monotonic()
    clone_rows(
        "agents_app_event",
        "id",
        template.pk,
        EVENTS_1E7 - 1,
        {
            "id": f"{template.pk} + i",
            "seq": f"{template.seq} + i",
            "payload": """jsonb_build_object('step', i, 'loss', 1.0 / i)""",
        },
    )
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE agents_app_eventstream SET last_seq = last_seq + %s WHERE name = %s",
            [EVENTS_1E7 - 1, AGENTS_STREAM],
        )
        cursor.execute(
            "SELECT setval(pg_get_serial_sequence('agents_app_event', 'id'), %s)",
            [template.pk + EVENTS_1E7],
        )
        cursor.execute("ANALYZE agents_app_event")
    report("populate_1e7_events_s", time.monotonic() - started, "s")
    rng = random.Random(10)

    def replay():
        after = rng.randrange(EVENTS_1E7)
        batch = events_after(stream=AGENTS_STREAM, after_seq=after, limit=500)
        [event.as_message() for event in batch]

    _timed(replay, 20)
    report("event_replay_1e7_p99_ms", percentile(_timed(replay, SAMPLES), 99), "ms")


def write_figures() -> None:
    """What one PostgreSQL takes from one writer, one statement's worth at a time (the
    ceilings docs/scaling.md reasons from): events recorded one by one, metric rows stored in
    batches of 1,000 as an executor stores what it read, memory entries written one by one."""
    from events_app.events import AGENTS_STREAM, record_event
    from memory_app.services import write_entry
    from scheduler_app.metrics.series import record_rows
    from scheduler_app.models import Run

    started = time.perf_counter()
    for i in range(2000):
        record_event(stream=AGENTS_STREAM, kind="note", agent_id="executor-w", payload={"i": i})
    report("events_per_s_one_writer", 2000 / (time.perf_counter() - started), "events/s")
    run = Run.objects.create(name="writes", command="python train.py", status="running")
    started = time.perf_counter()
    for batch in range(20):
        rows = [{"_step": batch * 1000 + i, "loss": 1.0 / (1 + i)} for i in range(1000)]
        record_rows(agent_id="executor-w", run_id=run.pk, rows=rows)
    report("metric_points_per_s_one_writer", 20_000 / (time.perf_counter() - started), "points/s")
    started = time.perf_counter()
    for i in range(1000):
        write_entry(type="context", project="p", agent_id="executor-w", data={"i": i})
    report("memory_writes_per_s_one_writer", 1000 / (time.perf_counter() - started), "writes/s")


def history(parts: list[str]) -> None:
    from django.contrib.auth import get_user_model

    from bench import ui
    from bench.harness import BenchSystem

    parts = parts or ["writes", "memory", "sweep", "runs", "events"]
    system = BenchSystem(port=ui.free_port())
    try:
        if "writes" in parts:
            write_figures()
        if "memory" in parts:
            memory_figures()
        if "events" in parts:
            event_figures()
        if "sweep" in parts or "runs" in parts:
            get_user_model().objects.create_user(ui.USER, password=ui.PASSWORD)
            system.collect_static()
            system.start_web()
            base = f"http://127.0.0.1:{system.port}"
            if "sweep" in parts:
                sweep_figures(system, base)
            if "runs" in parts:
                runs_figures(base)
    finally:
        system.close()
