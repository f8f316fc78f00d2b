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
  what one writer gets from one PostgreSQL (docs/scaling.md reasons from them), in
  bench/scale_writes.py.

`python bench/scale.py history [writes|memory|sweep|runs|events]`: one part, or all (about 25 min;
10^8 points take most of it).

Each figure is read from instants taken with time.time() (bench.memory's Span; a page's own
clock for the page figure), so that they compare with the calls a test watches:
tests/integration/test_bench_history_points.py checks each is the one its name says.
"""

from __future__ import annotations

import random
import statistics
import sys
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._report import report
from bench.memory import context_spans, fresh_table, write_spans
from bench.spans import Span, median_ms, percentile_ms, span_s, spanned, timed_spans

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


def memory_figures(entries: int = 10_000_000) -> None:
    from bench.memory_data import World
    from bench.ui import settle_tables

    world = World(entries)
    report("populate_1e7_entries_s", span_s(fresh_table(world)), "s")
    # Writes timed at once ran beside autovacuum's pass over the 10^7 new rows (2.6 ms p50).
    settle_tables("memory_app_memoryentry")
    rng = random.Random(7)
    assembled = context_spans(world, rng, SAMPLES, warm=20)
    report("context_p95_ms_1e7", percentile_ms(assembled, 95), "ms")
    report("memory_write_p50_ms_1e7", percentile_ms(write_spans(world, rng, SAMPLES), 50), "ms")


def seed_sweep(runs: int) -> str:
    """bench.ui's sweep of `runs` runs, analysed as autovacuum would after so many new runs."""
    from django.db import connection

    from bench import ui

    sweep_id = ui.seed_sweep(runs)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return sweep_id


def sweep_api_ms(base: str, sweep_id: str, runs: int) -> float:
    """The median of bench.ui's timed GETs of the sweep's table (its first, warming, left
    out): each from just before the GET to its answer read."""
    from bench import ui

    return statistics.median(ui.sweep_api_figure(base, sweep_id, runs=runs))


def sweep_page_draws(page, base: str, sweep_id: str, rounds: int) -> list:
    """The sweep's page loaded `rounds` times in `page`, each to its table and chart drawn
    (bench.ui.PageLoad: on the page's own clock, from its request)."""
    from bench import ui

    draws = []
    for _ in range(rounds):
        page.goto(f"{base}/sweeps/{sweep_id}/")
        page.wait_for_function("() => document.body.dataset.sweepDrawnAt", timeout=60_000)
        draws.append(ui.page_load(page, "document.body.dataset.sweepDrawnAt"))
    return draws


def sweep_figures(system, base: str) -> None:
    from bench import ui

    sweep_id = seed_sweep(SWEEP_1E5)
    report("sweep_table_api_100000_runs_ms", sweep_api_ms(base, sweep_id, SWEEP_1E5), "ms")
    with _browser(base) as page:
        draws = sweep_page_draws(page, base, sweep_id, ui.ROUNDS)
    report("sweep_table_page_100000_runs_ms", ui.median_ms(draws), "ms")


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


def populate_runs(
    runs: int = RUNS_1E6, points: int = POINTS_1E8, chart_points: int = CHART_POINTS
) -> tuple[str, Span]:
    """seed_runs_and_points, from before its first write to its VACUUM ANALYZE done (each of
    its statements committed as it ends, record_rows's transaction as it returns)."""
    return spanned(partial(seed_runs_and_points, runs, points, chart_points))


def seed_runs_and_points(runs: int, points: int, chart_points: int) -> str:
    """10^6 runs over a year, one series each for a tenth of them (990 points each) and one
    run of 10^6 points: 10^8 points in all (`chart_points` + 1 in the big run's series).
    Returns the big run's id."""
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
        runs - 2,
        {
            "id": "'run-h' || lpad(to_hex(i), 8, '0')",
            "name": "'trial ' || i",
            "status": f"(ARRAY[{statuses}])[1 + i %% 3]",
            "created_at": "now() - interval '365 days' + i * interval '31 seconds'",
        },
    )
    series_count = runs // 10
    per_series = (points - chart_points) // series_count
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
    big_series = MetricSeries.objects.get(run=big).pk
    _fill_points(big_series, chart_points, (series.pk, series_count, per_series))
    return big.pk


def _fill_points(big_series: int, chart_points: int, clones: tuple[int, int, int]) -> None:
    """The big run's `chart_points` points and each cloned series' (the template's id, how
    many, points each), then the indexes and the planner's statistics."""
    from django.db import connection

    template, series_count, per_series = clones
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT setval(pg_get_serial_sequence('scheduler_app_metricseries', 'id'), %s)",
            [template + series_count],
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
        cursor.execute(
            "INSERT INTO scheduler_app_metricpoint (series_id, step, value, time) "
            "SELECT %s, i, 1.0 / (1 + i), now() FROM generate_series(1, %s) i",
            [big_series, chart_points],
        )
        cursor.execute(
            "INSERT INTO scheduler_app_metricpoint (series_id, step, value, time) "
            "SELECT %s + s, i, 1.0 / (1 + i), now() "
            "FROM generate_series(1, %s) s, generate_series(0, %s) i",
            [template, series_count, per_series - 1],
        )
        for _, definition in indexes:
            cursor.execute(definition)
        cursor.execute(
            "UPDATE scheduler_app_metricseries SET points = %s, last_step = %s WHERE id = %s",
            [chart_points + 1, chart_points, big_series],
        )
        cursor.execute("VACUUM ANALYZE")  # as autovacuum does after many inserts


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


def get_spans(client, path: str, samples: int, warm: int = 1) -> list[Span]:
    """GET `path` with `client` (an httpx.Client), `warm` times untimed (the worker's imports
    and connection), then `samples` times, each from just before the GET to its answer read,
    a 2xx (else it raises)."""

    def get() -> None:
        client.get(path).raise_for_status()

    timed_spans(get, warm)
    return timed_spans(get, samples)


def runs_list_spans(base: str, cookies: dict, samples: int) -> list[Span]:
    """GET /runs/ as the person logged in with `cookies`."""
    import httpx

    with httpx.Client(base_url=base, cookies=cookies, timeout=60) as client:
        return get_spans(client, "/runs/", samples)


def run_chart_spans(base: str, token: str, run_id: str, samples: int) -> list[Span]:
    """GET /api/runs/{run_id}/metrics: the run page's chart data, with an API token."""
    import httpx

    with httpx.Client(base_url=base, headers={"X-Auth-Token": token}, timeout=60) as client:
        return get_spans(client, f"/api/runs/{run_id}/metrics", samples)


def runs_figures(base: str) -> None:
    from bench.harness import TOKEN

    big_run, seeded = populate_runs()
    report("populate_1e6_runs_1e8_points_s", span_s(seeded), "s")
    _report_sizes("scheduler_app_metricpoint", "metric_points_1e8")
    with _browser(base) as page:
        cookies = {c["name"]: c["value"] for c in page.context.cookies()}
    report("runs_list_1e6_ms", median_ms(runs_list_spans(base, cookies, 10)), "ms")
    report("run_chart_1e6_points_ms", median_ms(run_chart_spans(base, TOKEN, big_run, 5)), "ms")


def populate_events(count: int) -> Span:
    """`count` events on the agents' stream: one recorded, cloned count - 1 times, the
    stream's numbers and the id sequence moved on past them, and the table analysed, each
    statement committed as it ends. From before the first one recorded to the ANALYZE done."""
    return spanned(partial(_fill_events, count))[1]


def _fill_events(count: int) -> None:
    from django.db import connection

    from events_app.events import AGENTS_STREAM, record_event

    template = record_event(stream=AGENTS_STREAM, kind="note", agent_id="executor-x", payload={})
    clone_rows(
        "agents_app_event",
        "id",
        template.pk,
        count - 1,
        {
            "id": f"{template.pk} + i",
            "seq": f"{template.seq} + i",
            "payload": """jsonb_build_object('step', i, 'loss', 1.0 / i)""",
        },
    )
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE agents_app_eventstream SET last_seq = last_seq + %s WHERE name = %s",
            [count - 1, AGENTS_STREAM],
        )
        cursor.execute(
            "SELECT setval(pg_get_serial_sequence('agents_app_event', 'id'), %s)",
            [template.pk + count],
        )
        cursor.execute("ANALYZE agents_app_event")


def replay_spans(events: int, rng: random.Random, samples: int, warm: int) -> list[Span]:
    """A client resuming the agents' feed after a random one of `events`: its first batch
    read (500 events, as the WebSocket and SSE replay read it) and made into messages, `warm`
    times untimed, then `samples` times, each from just before the read to the last message."""
    from events_app.events import AGENTS_STREAM
    from events_app.selectors import events_after

    def replay(after: int) -> None:
        batch = events_after(stream=AGENTS_STREAM, after_seq=after, limit=500)
        [event.as_message() for event in batch]

    def spans(count: int) -> list[Span]:
        afters = [rng.randrange(events) for _ in range(count)]
        return [spanned(partial(replay, after))[1] for after in afters]

    spans(warm)
    return spans(samples)


def event_figures() -> None:
    report("populate_1e7_events_s", span_s(populate_events(EVENTS_1E7)), "s")
    replays = replay_spans(EVENTS_1E7, random.Random(10), SAMPLES, warm=20)
    report("event_replay_1e7_p99_ms", percentile_ms(replays, 99), "ms")


def history(parts: list[str]) -> None:
    from django.contrib.auth import get_user_model

    from bench import ui
    from bench.harness import BenchSystem
    from bench.scale_writes import write_figures

    parts = parts or ["writes", "memory", "sweep", "runs", "events"]
    system = BenchSystem(port=ui.free_port())
    try:
        if "writes" in parts:
            write_figures()  # bench.scale_writes
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
