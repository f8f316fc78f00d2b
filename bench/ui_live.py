"""bench/ui.py's live runs list figures (runs_20_live_event_to_cell_p50_ms / _p99_ms and
runs_20_live_long_tasks): 20 running runs on the runs list while each gets 10 metrics events
a second, published the way runagentd does; from an event's publish to its row's loss cell
changing in the page, and the page's long tasks meanwhile."""

import time
from dataclasses import dataclass

from bench._report import percentile

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


@dataclass(frozen=True)
class LiveCells:
    """The runs list while the metrics events went out, on one machine's clock (epoch ms)."""

    sent: dict[tuple[str, str], float]  # (agent, the loss it carries): its publish called
    changes: list[tuple[str, str, float]]  # each loss cell change: (agent, its text, Date.now())
    long_tasks: int  # the page's tasks over 50 ms from before the first event to the last shown


def cell_delays(live: LiveCells) -> list[float]:
    """An event's publish → its row's loss cell showing what it carries, ms, per change."""
    return [
        at - live.sent[(agent, text)]
        for agent, text, at in live.changes
        if (agent, text) in live.sent
    ]


def live_cells(page, base: str, agents: list[str]) -> LiveCells:
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
    changes = [tuple(change) for change in page.evaluate("window.cellChanges")]
    return LiveCells(sent, changes, int(page.evaluate("window.longTasks")))


def live_figures(live: LiveCells) -> dict[str, float]:
    delays = cell_delays(live)
    return {
        "runs_20_live_event_to_cell_p50_ms": percentile(delays, 50),
        "runs_20_live_event_to_cell_p99_ms": percentile(delays, 99),
        "runs_20_live_long_tasks": live.long_tasks,
    }
