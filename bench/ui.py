"""Browser figures, in Debian's Chromium (Playwright) against a real daphne:

- chat_1000_messages_load_ms: a chat of 1,000 messages, from the page request to its
  DOMContentLoaded (every message in the DOM; the script scrolls to the last).
- run_page_first_paint_ms: a run page, request to first contentful paint.
- metrics_1e6_points_chart_ms: a run whose loss series holds 10^6 points, request to its
  chart drawn (the server sends min/max buckets): uPlot's first draw of it, which comes in a
  microtask after run_page.js marks chartsReadyAt (FIRST_DRAWS notes it).
- metrics_1e6_points_api_ms: GET /api/runs/{id}/metrics of that run (the downsampling alone).
- runs_20_live_event_to_cell_p50_ms / _p99_ms: the runs list showing 20 running runs while
  each gets 10 metrics events a second (200 a second in all, published the way runagentd
  does): from an event's publish to its row's loss cell changing, in the page.
- sweep_table_200_runs_ms: a sweep of 200 runs x 10 params x 5 metrics, from the page request
  to its table and its chart drawn (sweep_table.js marks the moment; goal <= 500).
- sweep_table_api_10000_runs_ms: GET /api/sweeps/{id}/table of 10^4 such runs, sorted by a
  metric and filtered by a metric's range (goal <= 300).
- runs_20_live_long_tasks: main-thread tasks over 50 ms in the page during those events
  (0 = nothing a person would feel as jank; each event updates one cell, no re-render).

Each figure is the median of ROUNDS page loads. `python bench/ui.py sweeps` measures the two
sweep figures only (a minute, not several). A page figure is read from a PageLoad, an API one
from a Get, the live ones from bench/ui_live.py's LiveCells (tests/browser/test_bench_ui_points.py
checks that their instants are the ones named here).
"""

import math
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._report import report

ROUNDS = 5
POINTS = 1_000_000
MESSAGES = 1000
USER, PASSWORD = "bench", "bench-password-123"


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def seed() -> tuple[str, str]:
    """A chat of MESSAGES messages and a run with POINTS loss points; their ids."""
    from django.contrib.auth import get_user_model

    from scheduler_app.metrics.series import record_rows
    from scheduler_app.models import Run, RunStatus
    from sessions_app.models import ChatMessage, ChatSession

    user = get_user_model().objects.get(username=USER)
    chat = ChatSession.objects.create(title="A long chat", owner=user)
    ChatMessage.objects.bulk_create(
        ChatMessage(
            session=chat,
            seq=i + 1,
            role="user" if i % 2 == 0 else "assistant",
            content=f"Message {i}: " + "a few words of a reply " * 8,
        )
        for i in range(MESSAGES)
    )
    run = Run.objects.create(name="1e6 points", command="python train.py", status=RunStatus.DONE)
    for start in range(0, POINTS, 100_000):
        rows = [
            {"_step": s, "loss": 2.0 / math.sqrt(s + 1) + 0.01 * math.sin(s)}
            for s in range(start, min(start + 100_000, POINTS))
        ]
        record_rows(agent_id="executor-bench", run_id=run.pk, rows=rows)
    return chat.pk, run.pk


SWEEP_RUNS, SWEEP_PARAMS, SWEEP_METRICS = 200, 10, 5


def _sweep_params(i: int) -> dict:
    numbers = {f"p{k}": round(0.001 * (i % (k + 3)) * (k + 1), 6) for k in range(SWEEP_PARAMS - 1)}
    return {**numbers, "optimizer": ("adam", "sgd", "lion")[i % 3]}


BIG_SWEEP_RUNS = 10_000


@dataclass(frozen=True)
class Get:
    """One GET timed at the client (time.time())."""

    sent: float  # just before the request was made
    answered: float  # its whole answer received


def get_ms(get: Get) -> float:
    return (get.answered - get.sent) * 1000


def _timed_get(url: str, **kwargs):
    """(its Get, the response) of a GET of `url` with the bench's token."""
    import httpx

    from bench.harness import TOKEN

    sent = time.time()
    response = httpx.get(url, headers={"X-Auth-Token": TOKEN}, timeout=60, **kwargs)
    answered = time.time()
    response.raise_for_status()
    return Get(sent, answered), response


def sweep_api_gets(base: str, sweep_id: str, runs: int = BIG_SWEEP_RUNS) -> list[Get]:
    """GET /api/sweeps/{id}/table of `runs` runs, sorted by a metric and filtered by
    a range (every run read, sorted and filtered; the first 100 rows sent), per round."""
    url = f"{base}/api/sweeps/{sweep_id}/table"
    query = {"sort": "-metric.m2.last", "where": "metric.m0.last:between:0,0.5"}
    gets = []
    for _ in range(ROUNDS + 1):  # the first warms the worker's imports and connection
        get, response = _timed_get(url, params=query)
        assert response.json()["run_count"] == runs
        gets.append(get)
    return gets[1:]


def sweep_api_figure(base: str, sweep_id: str, runs: int = BIG_SWEEP_RUNS) -> list[float]:
    return [get_ms(get) for get in sweep_api_gets(base, sweep_id, runs)]


def seed_sweep(runs: int = SWEEP_RUNS) -> str:
    """A sweep of `runs` done runs, each with SWEEP_PARAMS params (numbers, and one a
    string) and SWEEP_METRICS series (MetricSeries rows, as the watchdog keeps them)."""
    from scheduler_app.models import MetricSeries, Run, RunStatus, Sweep

    sweep = Sweep.objects.create(name=f"{runs} runs", goal="bench")
    runs = Run.objects.bulk_create(
        Run(
            id=f"run-bench{sweep.pk[-6:]}-{i:06d}",  # bulk_create skips a random id's clash retry
            name=f"trial {i}",
            command="python train.py",
            status=RunStatus.DONE,
            sweep=sweep,
            params=_sweep_params(i),
        )
        for i in range(runs)
    )
    MetricSeries.objects.bulk_create(
        MetricSeries(
            run=run,
            agent_id=f"executor-{sweep.pk}-{i:05d}",
            key=f"m{k}",
            source="jsonl",
            points=1000,
            first_step=0,
            last_step=999,
            last_value=1.0 / (1 + i + k),
            min_value=0.5 / (1 + i + k),
            max_value=2.0 + k,
        )
        for i, run in enumerate(runs)
        for k in range(SWEEP_METRICS)
    )
    settle_tables("scheduler_app_run", "scheduler_app_metricseries")
    return sweep.pk


def settle_tables(*tables: str) -> None:
    """The tables as autovacuum leaves them within a minute of a bulk write: planner
    statistics, and the visibility map that index-only reads rely on. Timed at once, a
    figure caught autovacuum working beside it, or not (272 to 305 ms, the same code)."""
    from django.db import connection

    with connection.cursor() as cursor:
        for table in tables:
            cursor.execute(f"VACUUM ANALYZE {table}")


@dataclass(frozen=True)
class PageLoad:
    """One page load on the page's own clock (performance.now(): ms from its navigation's
    start, as the request began), which started at `origin` (performance.timeOrigin, epoch ms)."""

    origin: float
    ready: float  # what the figure waits for was there (its ms since the request)


def load_ms(load: PageLoad) -> float:
    return load.ready  # the request is the page clock's 0


def page_load(page, ready: str) -> PageLoad:
    """The open page's PageLoad; `ready`: the JS expression of its ready instant."""
    origin, at = page.evaluate(f"() => [performance.timeOrigin, Number({ready})]")
    return PageLoad(origin, at)


# uPlot draws a chart in a microtask after the code that made it, so after run_page.js has
# marked chartsReadyAt: each chart's first draw is noted (its "draw" hook) by this script, run
# before the page's own, and chartsDrawnAt is when every chart made had drawn once.
FIRST_DRAWS = """(() => {
    let made = 0, drawn = 0, real;
    Object.defineProperty(window, "uPlot", {
        configurable: true,
        get: () => real,
        set(uPlot) {
            real = new Proxy(uPlot, { construct(target, [opts, ...rest]) {
                made += 1;
                let first = true;
                const noted = () => {
                    if (!first) return;
                    first = false;
                    drawn += 1;
                    if (drawn === made) window.chartsDrawnAt = performance.now();
                };
                const hooks = { ...opts.hooks, draw: [...((opts.hooks || {}).draw || []), noted] };
                return Reflect.construct(target, [{ ...opts, hooks }, ...rest]);
            } });
        },
    });
})();"""
CHARTS_DRAWN = "() => document.body.dataset.chartsReadyAt && window.chartsDrawnAt !== undefined"
DOM_READY = "performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd"
FIRST_PAINT = "performance.getEntriesByName('first-contentful-paint')[0].startTime"


def page_loads(page, base: str, chat_id: str, run_id: str) -> dict[str, list[PageLoad]]:
    chat, paint, chart = [], [], []
    page.add_init_script(FIRST_DRAWS)
    for _ in range(ROUNDS):
        page.goto(f"{base}/chat/{chat_id}/", wait_until="domcontentloaded")
        assert page.locator("article.msg").count() == MESSAGES
        chat.append(page_load(page, DOM_READY))
        page.goto(f"{base}/runs/{run_id}/")
        page.wait_for_function(CHARTS_DRAWN, timeout=60_000)
        chart.append(page_load(page, "window.chartsDrawnAt"))
        paint.append(page_load(page, FIRST_PAINT))
    return {
        "chat_1000_messages_load_ms": chat,
        "run_page_first_paint_ms": paint,
        "metrics_1e6_points_chart_ms": chart,
    }


def median_ms(loads: list[PageLoad]) -> float:
    return statistics.median(load_ms(load) for load in loads)


def sweep_page_loads(page, base: str, sweep_id: str) -> list[PageLoad]:
    loads = []
    for _ in range(ROUNDS):
        # limit=200: the whole sweep on one page, every run in the table and the chart.
        page.goto(f"{base}/sweeps/{sweep_id}/?limit=200")
        page.wait_for_function("() => document.body.dataset.sweepDrawnAt", timeout=60_000)
        assert page.evaluate("document.body.dataset.sweepRows") == str(SWEEP_RUNS)
        assert page.locator("#sweep-svg path.line").count() == SWEEP_RUNS
        loads.append(page_load(page, "document.body.dataset.sweepDrawnAt"))
    return loads


def metrics_api_gets(base: str, run_id: str) -> list[Get]:
    return [_timed_get(f"{base}/api/runs/{run_id}/metrics")[0] for _ in range(ROUNDS)]


def logged_in_page(browser, base: str):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{base}/accounts/login/")
    page.fill("#id_username", USER)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base}/")
    return page


UNITS = {
    "chat_1000_messages_load_ms": "ms",
    "run_page_first_paint_ms": "ms",
    "metrics_1e6_points_chart_ms": "ms",
    "metrics_1e6_points_api_ms": "ms",
    "sweep_table_200_runs_ms": "ms",
    "sweep_table_api_10000_runs_ms": "ms",
    "runs_20_live_event_to_cell_p50_ms": "ms",
    "runs_20_live_event_to_cell_p99_ms": "ms",
    "runs_20_live_long_tasks": "tasks",
}


def main(sweeps_only: bool = False) -> None:
    from django.contrib.auth import get_user_model
    from playwright.sync_api import sync_playwright

    from bench import ui_live
    from bench.harness import BenchSystem

    system = BenchSystem(port=free_port())
    figures: dict[str, float] = {}
    try:
        system.collect_static()
        get_user_model().objects.create_user(USER, password=PASSWORD)
        if not sweeps_only:
            chat_id, run_id = seed()
            live_agents = ui_live.seed_live_runs()
        sweep_id = seed_sweep()
        big_sweep_id = seed_sweep(BIG_SWEEP_RUNS)
        system.start_web()
        base = f"http://127.0.0.1:{system.port}"
        big_sweep = statistics.median(sweep_api_figure(base, big_sweep_id))
        figures["sweep_table_api_10000_runs_ms"] = big_sweep
        if not sweeps_only:
            api = [get_ms(get) for get in metrics_api_gets(base, run_id)]
            figures["metrics_1e6_points_api_ms"] = statistics.median(api)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path="/usr/bin/chromium",
                headless=True,
                args=["--no-sandbox", "--disable-gpu", "--no-first-run"],
            )
            page = logged_in_page(browser, base)
            if not sweeps_only:
                loads = page_loads(page, base, chat_id, run_id)
                figures.update({name: median_ms(each) for name, each in loads.items()})
            sweep = sweep_page_loads(page, base, sweep_id)
            figures["sweep_table_200_runs_ms"] = median_ms(sweep)
            if not sweeps_only:
                live = ui_live.live_cells(page, base, live_agents)
                figures.update(ui_live.live_figures(live))
            browser.close()
    finally:
        system.close()
    for name, unit in UNITS.items():
        if name in figures:
            report(name, figures[name], unit)


if __name__ == "__main__":
    main(sweeps_only=sys.argv[1:] == ["sweeps"])
