"""A research loop woken by what its runs do while they go on (issue 39 §3): a metric that
crosses a value, an alert raised, as the loop's `wake_when` says (agentsys.run_waits'
conditions: "alert", {"metric": "loss", "below": 0.1}). Its runs' ends wake it anyway
(agentsys.research.experiments.wait_for_news); this is the rest.

The waits of all the loops of one event loop share one RunWaiters (one LISTEN connection,
one read per piece of news), reached through the loop's run port. A metric condition that
woke the loop for a run is not watched again for that run (it would wake it at once each
time after); an alert counts when raised since the loop last woke, so one raised while the
loop was talking to its model is not missed.
"""

from __future__ import annotations

import asyncio
import logging
import weakref

from agentsys.run_waiters import RunWaiters
from agentsys.run_waits import BadCondition, Condition, Held, RunState, parse_until

logger = logging.getLogger("agentsys.research")

# The conditions a loop may wake on: its runs' ends wake it already (wake_on).
WAKE_KINDS = ("alert", "metric")
WAIT_ROUND_S = 86400.0  # a wait with nothing held is begun again after this
_shared: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # event loop → RunWaiters


def parse_wake_when(value) -> tuple:
    """`wake_when` as the loop keeps it (a tuple of conditions as data); a BadCondition
    naming what is wrong. None or [] is none."""
    if not value:
        return ()
    conditions = parse_until(value)
    for condition in conditions:
        if condition.kind not in WAKE_KINDS:
            raise BadCondition(
                f"wake_when: {condition.kind} wakes the loop already (its wake_on); "
                'give "alert" or a metric, e.g. {"metric": "loss", "below": 0.1}'
            )
    return tuple(condition.as_data() for condition in conditions)


async def waiters_for(agent) -> RunWaiters | None:
    """This event loop's RunWaiters, made with the first loop that asks; None when the
    agent has no run port (a unit test's harness)."""
    runs = agent.runs
    if runs is None:
        return None
    loop = asyncio.get_running_loop()
    found = _shared.get(loop)
    if found is None:

        async def snapshot(run_ids: list[str]) -> dict[str, RunState]:
            return await asyncio.to_thread(runs.run_states, run_ids=run_ids)

        dsn = await asyncio.to_thread(runs.runs_news_dsn)
        found = _shared.setdefault(loop, RunWaiters(dsn, snapshot))
    return found


async def run_ids_of(agent, children: list[str]) -> list[str]:
    """The Runs of the loop's experiments (executor ids), those that have one."""
    found = await asyncio.gather(
        *(agent.in_runs("run_of", agent_id=child) for child in children), return_exceptions=True
    )
    return [run_id for run_id in found if isinstance(run_id, str) and run_id]


async def woken_by_runs(
    agent, run_ids: list[str], wake_when: tuple, *, since: float, woken: list[list[str]]
) -> Held:
    """Until one of `wake_when` holds for one of `run_ids`; never returns otherwise (the
    caller cancels it). `woken`: [run id, condition in words] pairs that woke the loop
    before, not watched again. Trouble reading is logged, and the wait goes on without
    this watch: the runs' ends still wake the loop."""
    try:
        waits = await _waits(agent, run_ids, wake_when, since, woken)
        if waits:
            return await _first(waits)
    except Exception:
        logger.exception("%s: could not watch its runs for %s", agent.id, list(wake_when))
    await asyncio.Event().wait()  # only cancelled
    raise AssertionError("not reached")


async def _waits(agent, run_ids, wake_when, since, woken) -> list:
    conditions = parse_until(list(wake_when)) if wake_when and run_ids else []
    waiters = await waiters_for(agent) if conditions else None
    if waiters is None:
        return []
    done_before = {(run_id, words) for run_id, words in woken}
    waits = []
    for condition in conditions:
        watched = run_ids
        if condition.kind == "metric":
            watched = [r for r in run_ids if (r, condition.words()) not in done_before]
        if watched:
            waits.append(_wait(waiters, watched, condition, since))
    return waits


async def _first(waits: list) -> Held:
    tasks = [asyncio.ensure_future(wait) for wait in waits]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        return next(iter(done)).result()
    finally:
        for task in tasks:
            task.cancel()


async def _wait(waiters: RunWaiters, run_ids: list[str], condition: Condition, since: float):
    while True:
        outcome = await waiters.wait(run_ids, [condition], WAIT_ROUND_S, since=since)
        if outcome.held is not None:
            return outcome.held


__all__ = ["WAKE_KINDS", "parse_wake_when", "run_ids_of", "woken_by_runs"]
