"""bench/ui.py's figures time what their names say (issue 40 §3), at a tiny size in Chromium
against a real daphne: each page figure runs from its navigation's start, the request the
bench's goto made, to the instant its name names on that page (DOMContentLoaded's end with every
message in, the first contentful paint, the chart's first draw once its data came, the sweep's
table and chart once its rows came); each API figure spans its GET and nothing else, the
warm-up left out; each live figure runs from the publish of its event to its row's loss cell
showing that event's value, once, and the long tasks counted are those during the events, not
those of the page's load. The page's own clock is read beside the bench's, in the same page."""

from __future__ import annotations

import asyncio
import copy
import statistics
import time
from dataclasses import dataclass

import httpx
import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import Page

from bench import harness, ui, ui_live
from events_app import events
from tests import live_clients
from tests.call_watch import watch_calls

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
CLOCKS_MS = 5  # Chromium's timeOrigin and time.time(): one clock, converted apart
BUSY_MS = 120  # a long task (over 50 ms) the test makes in the page

# What the test reads beside the bench: its own notes of the page's DOMContentLoaded and
# canvas strokes, from before the page's scripts, and each long task from the page's start.
NOTES = f"""(() => {{
    document.addEventListener("DOMContentLoaded", () => {{
        window.atDomReady = {{
            at: performance.now(),
            messages: document.querySelectorAll("article.msg").length,
        }};
        if (location.pathname === "/runs/") {{  // a long task of its load, before the events
            const until = performance.now() + {BUSY_MS};
            while (performance.now() < until) {{}}
        }}
    }});
    window.strokes = [];
    const stroke = CanvasRenderingContext2D.prototype.stroke;
    CanvasRenderingContext2D.prototype.stroke = function (...args) {{
        window.strokes.push(performance.now());
        return stroke.apply(this, args);
    }};
    window.allLongTasks = 0;
    new PerformanceObserver((list) => {{ window.allLongTasks += list.getEntries().length; }})
        .observe({{ type: "longtask" }});
}})();"""

FACTS = """() => ({
    nav: performance.getEntriesByType("navigation")[0].toJSON(),
    paint: performance.getEntriesByName("first-contentful-paint").map((e) => e.startTime),
    fetched: performance.getEntriesByType("resource")
        .map((e) => [new URL(e.name).pathname, e.responseEnd]),
    atDomReady: window.atDomReady,
    strokes: window.strokes,
    chartsReadyAt: Number(document.body.dataset.chartsReadyAt),
    sweepDrawnAt: Number(document.body.dataset.sweepDrawnAt),
    sweepRows: document.querySelectorAll("#sweep-table tbody tr").length,
})"""


@dataclass(frozen=True)
class Read:
    """One PageLoad the bench read, with what the test read in the same page right after."""

    ready: str  # the bench's JS expression of its ready instant
    load: ui.PageLoad
    at: float  # time.time() as the bench began to read it
    facts: dict


@pytest.fixture
def bench_page(chromium, module_web, monkeypatch):
    """The bench's logged-in page on the module's web, at a tiny size, with the test's notes;
    (base url, page)."""
    for name, value in (("ROUNDS", 2), ("MESSAGES", 6), ("POINTS", 3000), ("SWEEP_RUNS", 5)):
        monkeypatch.setattr(ui, name, value)
    monkeypatch.setattr(ui_live, "LIVE_RUNS", 2)
    monkeypatch.setattr(ui_live, "LIVE_ROUNDS", 3)
    monkeypatch.setattr(harness, "TOKEN", live_clients.TOKEN)
    get_user_model().objects.create_user(ui.USER, password=ui.PASSWORD)
    page = ui.logged_in_page(chromium, module_web.url)
    page.add_init_script(NOTES)
    yield module_web.url, page
    page.close()


def _watch_loads(monkeypatch) -> list[Read]:
    reads, real = [], ui.page_load

    def loaded(page, ready: str) -> ui.PageLoad:
        at = time.time()
        load = real(page, ready)
        reads.append(Read(ready, load, at, page.evaluate(FACTS)))
        return load

    monkeypatch.setattr(ui, "page_load", loaded)
    return reads


def _starts_at_its_goto(read: Read, gotos) -> None:
    """Start: the page's navigation began with the last goto before the read (0 on its clock);
    and what the figure waits for was there by the time the bench read it."""
    goto = [call for call in gotos if call.returned <= read.at][-1]
    assert goto.began * 1000 - CLOCKS_MS <= read.load.origin <= goto.returned * 1000 + CLOCKS_MS
    assert 0 < read.load.ready <= read.at * 1000 - read.load.origin + CLOCKS_MS


def _fetched(read: Read, path: str) -> float:
    """When the page's first fetch of `path` had its whole answer (its clock)."""
    return next(end for fetched, end in read.facts["fetched"] if fetched == path)


def test_page_and_api_figures_run_from_their_request_to_what_each_names(bench_page, monkeypatch):
    base, page = bench_page
    chat_id, run_id = ui.seed()
    sweep_id = ui.seed_sweep(ui.SWEEP_RUNS)
    gotos = watch_calls(monkeypatch, Page, "goto")
    reads = _watch_loads(monkeypatch)
    loads = {**ui.page_loads(page, base, chat_id, run_id)}
    loads["sweep_table_200_runs_ms"] = ui.sweep_page_loads(page, base, sweep_id)
    by_figure = {}
    for name, each in loads.items():
        by_figure[name] = [read for read in reads if read.load in each]
        assert [read.load for read in by_figure[name]] == each and len(each) == ui.ROUNDS
        for read in by_figure[name]:
            _starts_at_its_goto(read, gotos)
        assert ui.median_ms(each) == statistics.median(load.ready for load in each)
    _ends_at_what_each_names(by_figure, run_id, sweep_id)
    gets = watch_calls(monkeypatch, httpx, "get")
    _api_figures_span_their_gets(base, run_id, gets)


def _ends_at_what_each_names(by_figure: dict[str, list[Read]], run_id: str, sweep_id: str):
    for read in by_figure["chat_1000_messages_load_ms"]:
        # DOMContentLoaded's end (its handlers, the scroll to the last message, done), every
        # message in the DOM as it began, the whole page received before.
        nav, at_dom_ready = read.facts["nav"], read.facts["atDomReady"]
        assert read.load.ready == nav["domContentLoadedEventEnd"]
        assert at_dom_ready["messages"] == ui.MESSAGES
        assert nav["responseEnd"] <= at_dom_ready["at"] <= read.load.ready
    for read in by_figure["run_page_first_paint_ms"]:
        assert read.load.ready == read.facts["paint"][0]
        assert read.facts["nav"]["responseStart"] <= read.load.ready
    for read in by_figure["metrics_1e6_points_chart_ms"]:
        # The chart drawn on its canvas, after its points came and the page said so.
        assert _fetched(read, f"/api/runs/{run_id}/metrics") <= read.load.ready
        assert read.facts["chartsReadyAt"] <= read.load.ready
        assert any(stroke <= read.load.ready for stroke in read.facts["strokes"])
    for read in by_figure["sweep_table_200_runs_ms"]:
        # The page's mark, once its rows came and every one of them is in the table.
        assert read.load.ready == read.facts["sweepDrawnAt"]
        assert _fetched(read, f"/api/sweeps/{sweep_id}/table") <= read.load.ready
        assert read.facts["sweepRows"] == ui.SWEEP_RUNS


def _spanned(call) -> float:
    return (call.returned - call.began) * 1000


# What a figure may hold beyond its GET: a few statements, and on a loaded machine a
# descheduling between the bench's clock and the call (a scheduler tick, 4 ms, or more with
# many runnable). Which GETs are timed is checked call by call, not by this bound.
SLACK_MS = 25


def _api_figures_span_their_gets(base: str, run_id: str, calls) -> None:
    """Each figure is its own GET and only it; the first GET of the sweep's, a warm-up, left
    out."""
    sweep_id = ui.seed_sweep(7)
    figures = ui.sweep_api_figure(base, sweep_id, runs=7)
    assert len(figures) == len(calls) - 1 == ui.ROUNDS
    for figure, call in zip(figures, calls[1:], strict=True):
        assert call.result.url.path == f"/api/sweeps/{sweep_id}/table"
        assert _spanned(call) <= figure < _spanned(call) + SLACK_MS
    calls.clear()
    gets = ui.metrics_api_gets(base, run_id)
    assert len(gets) == len(calls) == ui.ROUNDS
    for get, call in zip(gets, calls, strict=True):
        assert call.result.url.path == f"/api/runs/{run_id}/metrics"
        assert get.sent <= call.began and call.returned <= get.answered
        assert _spanned(call) <= ui.get_ms(get) < _spanned(call) + SLACK_MS


# The bench's observer of the cells, and then the test's: the first change of a cell makes a
# long task (BUSY_MS) in the page while the events go out.
def _busy_once_the_events_show(watch_cells: str) -> str:
    return f"""() => {{
        ({watch_cells})();
        const cell = document.querySelector("td.loss");
        new MutationObserver((_, observer) => {{
            observer.disconnect();
            const until = performance.now() + {BUSY_MS};
            while (performance.now() < until) {{}}
        }}).observe(cell, {{ childList: true, characterData: true, subtree: true }});
    }}"""


@pytest.fixture
def layer_on_test_db(settings, monkeypatch):
    """The channel layer of this process (the bench publishes from it) on the test database;
    what the bench's publishing loop opens is closed on that loop, as it ends."""
    import channels_postgres.db
    from asgiref.sync import sync_to_async
    from channels.layers import channel_layers
    from django.db import connection, connections

    layers = copy.deepcopy(settings.CHANNEL_LAYERS)
    layers["default"]["CONFIG"]["NAME"] = connection.settings_dict["NAME"]
    settings.CHANNEL_LAYERS = layers
    channel_layers.backends = {}
    monkeypatch.setattr(channels_postgres.db, "connection_pool", None)
    monkeypatch.setattr(channels_postgres.db, "is_creating_connection_pool", asyncio.Lock())
    real = ui_live.publish_metrics

    async def publish_metrics(agents):
        try:
            return await real(agents)
        finally:
            pool, channels_postgres.db.connection_pool = channels_postgres.db.connection_pool, None
            if pool is not None:
                await pool.close()
            await sync_to_async(connections.close_all, thread_sensitive=True)()

    monkeypatch.setattr(ui_live, "publish_metrics", publish_metrics)
    yield
    channel_layers.backends = {}


def test_live_figures_run_from_each_publish_to_its_cell_and_count_the_events_long_tasks(
    bench_page, layer_on_test_db, monkeypatch
):
    base, page = bench_page
    agents = ui_live.seed_live_runs()
    monkeypatch.setattr(ui_live, "WATCH_CELLS", _busy_once_the_events_show(ui_live.WATCH_CELLS))
    stores = watch_calls(monkeypatch, events, "record_event")
    publishes = watch_calls(monkeypatch, events, "publish_message")
    waits = watch_calls(monkeypatch, Page, "wait_for_function")
    live = ui_live.live_cells(page, base, agents)
    stored = [call for call in stores if call.kwargs.get("kind") == "metrics"]
    assert (
        len(stored) == len(publishes) == len(live.sent) == ui_live.LIVE_RUNS * ui_live.LIVE_ROUNDS
    )
    # Start: each event's publish called, once it was stored (the store is not timed).
    for store, publish in zip(stored, publishes, strict=True):
        key = (store.kwargs["agent_id"], str(store.kwargs["payload"]["last"]["loss"]))
        assert store.returned * 1000 <= live.sent[key] <= publish.began * 1000
    # End: its row's loss cell showing its value, once for each event, before the bench saw
    # every cell at the last value (Date.now(): whole ms).
    shown = [(agent, text) for agent, text, _ in live.changes]
    assert sorted(shown) == sorted(live.sent)
    for agent, text, at in live.changes:
        assert live.sent[(agent, text)] - 1 <= at <= waits[-1].returned * 1000 + CLOCKS_MS
    assert ui_live.cell_delays(live) == [at - live.sent[(a, t)] for a, t, at in live.changes]
    # The long tasks: the one made while the events showed, not the one of the page's load.
    assert 1 <= live.long_tasks < page.evaluate("window.allLongTasks")
