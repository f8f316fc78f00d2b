"""Browser figures, in Debian's Chromium (Playwright) against a real daphne:

- chat_1000_messages_load_ms: a chat of 1,000 messages, from the page request to its
  DOMContentLoaded (every message in the DOM; the script scrolls to the last).
- run_page_first_paint_ms: a run page, request to first contentful paint.
- metrics_1e6_points_chart_ms: a run whose loss series holds 10^6 points, request to its
  chart drawn (the server sends min/max buckets; run_page.js marks the moment).
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
sweep figures only (a minute, not several).
"""

import math
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._report import percentile, report

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
            for s in range(start, start + 100_000)
        ]
        record_rows(agent_id="executor-bench", run_id=run.pk, rows=rows)
    return chat.pk, run.pk


SWEEP_RUNS, SWEEP_PARAMS, SWEEP_METRICS = 200, 10, 5


def _sweep_params(i: int) -> dict:
    numbers = {f"p{k}": round(0.001 * (i % (k + 3)) * (k + 1), 6) for k in range(SWEEP_PARAMS - 1)}
    return {**numbers, "optimizer": ("adam", "sgd", "lion")[i % 3]}


BIG_SWEEP_RUNS = 10_000


def sweep_api_figure(base: str, sweep_id: str, runs: int = BIG_SWEEP_RUNS) -> list[float]:
    """GET /api/sweeps/{id}/table of `runs` runs, sorted by a metric and filtered by
    a range (every run read, sorted and filtered; the first 100 rows sent), per round."""
    import httpx

    from bench.harness import TOKEN

    url = f"{base}/api/sweeps/{sweep_id}/table"
    query = {"sort": "-metric.m2.last", "where": "metric.m0.last:between:0,0.5"}
    times = []
    for _ in range(ROUNDS + 1):  # the first warms the worker's imports and connection
        started = time.perf_counter()
        response = httpx.get(url, params=query, headers={"X-Auth-Token": TOKEN}, timeout=60)
        response.raise_for_status()
        times.append((time.perf_counter() - started) * 1000)
        assert response.json()["run_count"] == runs
    return times[1:]


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
    return sweep.pk


LIVE_RUNS, LIVE_ROUNDS = 20, 30

WATCH_CELLS = """() => {
    window.cellChanges = [];
    window.longTasks = 0;
    new PerformanceObserver((list) => { window.longTasks += list.getEntries().length; })
        .observe({ type: "longtask" });
    for (const cell of document.querySelectorAll("td.loss")) {
        const agent = cell.closest("tr").dataset.agent;
        new MutationObserver(() => window.cellChanges.push([agent, cell.textContent, Date.now()]))
            .observe(cell, { childList: true, characterData: true, subtree: true });
    }
}"""


def seed_live_runs() -> list[str]:
    from agents_app.models import Agent
    from scheduler_app.models import Run, RunStatus

    agents = []
    for i in range(LIVE_RUNS):
        agent = Agent.objects.create(id=f"executor-live{i:04d}", role="executor")
        Run.objects.create(
            name=f"live {i}", command="python train.py", status=RunStatus.RUNNING, agent=agent
        )
        agents.append(agent.pk)
    return agents


async def publish_metrics(agents: list[str]) -> dict:
    """LIVE_ROUNDS rounds of one metrics event per run, 100 ms apart; when each was sent."""
    import asyncio

    from asgiref.sync import sync_to_async

    from events_app.events import AGENTS_STREAM, record_event
    from events_app.events import publish_message as publish

    store = sync_to_async(record_event, thread_sensitive=True)
    sent = {}
    for k in range(1, LIVE_ROUNDS + 1):
        for agent in agents:
            event = await store(
                stream=AGENTS_STREAM,
                kind="metrics",
                agent_id=agent,
                payload={"rows": 1, "last": {"loss": k}},
                publish_live=False,
            )
            sent[(agent, str(k))] = time.time() * 1000
            await publish(event.as_message())
        await asyncio.sleep(0.1)
    return sent


def live_runs_figures(page, base: str, agents: list[str]) -> tuple[list[float], int]:
    import asyncio
    import concurrent.futures

    page.goto(f"{base}/runs/?status=running")
    page.wait_for_function("() => document.getElementById('live-state').textContent === 'live'")
    page.evaluate(WATCH_CELLS)
    # Playwright's loop runs in this thread; the events go out from a loop of their own.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        sent = pool.submit(asyncio.run, publish_metrics(agents)).result()
    page.wait_for_function(
        f"() => [...document.querySelectorAll('td.loss')].every(c => c.textContent === "
        f"'{LIVE_ROUNDS}')",
        timeout=60_000,
    )
    changes = page.evaluate("window.cellChanges")
    delays = [at - sent[(agent, text)] for agent, text, at in changes if (agent, text) in sent]
    return delays, int(page.evaluate("window.longTasks"))


def page_figures(page, base: str, chat_id: str, run_id: str) -> dict[str, float]:
    chat, paint, chart = [], [], []
    for _ in range(ROUNDS):
        page.goto(f"{base}/chat/{chat_id}/", wait_until="domcontentloaded")
        assert page.locator("article.msg").count() == MESSAGES
        chat.append(
            page.evaluate("performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd")
        )
        page.goto(f"{base}/runs/{run_id}/")
        page.wait_for_function("() => document.body.dataset.chartsReadyAt", timeout=60_000)
        chart.append(float(page.evaluate("document.body.dataset.chartsReadyAt")))
        paint.append(
            page.evaluate("performance.getEntriesByName('first-contentful-paint')[0].startTime")
        )
    return {
        "chat_1000_messages_load_ms": statistics.median(chat),
        "run_page_first_paint_ms": statistics.median(paint),
        "metrics_1e6_points_chart_ms": statistics.median(chart),
    }


def sweep_page_figure(page, base: str, sweep_id: str) -> float:
    sweep = []
    for _ in range(ROUNDS):
        # limit=200: the whole sweep on one page, every run in the table and the chart.
        page.goto(f"{base}/sweeps/{sweep_id}/?limit=200")
        page.wait_for_function("() => document.body.dataset.sweepDrawnAt", timeout=60_000)
        assert page.evaluate("document.body.dataset.sweepRows") == str(SWEEP_RUNS)
        assert page.locator("#sweep-svg path.line").count() == SWEEP_RUNS
        sweep.append(float(page.evaluate("document.body.dataset.sweepDrawnAt")))
    return statistics.median(sweep)


def metrics_api_figure(base: str, run_id: str) -> float:
    import httpx

    from bench.harness import TOKEN

    api = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        httpx.get(
            f"{base}/api/runs/{run_id}/metrics", headers={"X-Auth-Token": TOKEN}, timeout=60
        ).raise_for_status()
        api.append((time.perf_counter() - started) * 1000)
    return statistics.median(api)


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

    from bench.harness import BenchSystem

    system = BenchSystem(port=free_port())
    figures: dict[str, float] = {}
    try:
        system.collect_static()
        get_user_model().objects.create_user(USER, password=PASSWORD)
        if not sweeps_only:
            chat_id, run_id = seed()
            live_agents = seed_live_runs()
        sweep_id = seed_sweep()
        big_sweep_id = seed_sweep(BIG_SWEEP_RUNS)
        system.start_web()
        base = f"http://127.0.0.1:{system.port}"
        big_sweep = statistics.median(sweep_api_figure(base, big_sweep_id))
        figures["sweep_table_api_10000_runs_ms"] = big_sweep
        if not sweeps_only:
            figures["metrics_1e6_points_api_ms"] = metrics_api_figure(base, run_id)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path="/usr/bin/chromium",
                headless=True,
                args=["--no-sandbox", "--disable-gpu", "--no-first-run"],
            )
            page = logged_in_page(browser, base)
            if not sweeps_only:
                figures.update(page_figures(page, base, chat_id, run_id))
            figures["sweep_table_200_runs_ms"] = sweep_page_figure(page, base, sweep_id)
            if not sweeps_only:
                live_delays, long_tasks = live_runs_figures(page, base, live_agents)
                figures["runs_20_live_event_to_cell_p50_ms"] = percentile(live_delays, 50)
                figures["runs_20_live_event_to_cell_p99_ms"] = percentile(live_delays, 99)
                figures["runs_20_live_long_tasks"] = long_tasks
            browser.close()
    finally:
        system.close()
    for name, unit in UNITS.items():
        if name in figures:
            report(name, figures[name], unit)


if __name__ == "__main__":
    main(sweeps_only=sys.argv[1:] == ["sweeps"])
