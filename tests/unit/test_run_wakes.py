"""A research loop's `wake_when` (agentsys.research.run_wakes): which conditions it takes, and
a loop woken by an alert or a metric crossing of a run still going on, through a fake run
port whose runs change as a test says."""

from __future__ import annotations

import asyncio
import time

import pytest

from agentsys.research import run_wakes
from agentsys.run_waiters import RunWaiters
from agentsys.run_waits import BadCondition, RunState


def test_wake_when_takes_alerts_and_metrics_and_refuses_ends_saying_why():
    assert run_wakes.parse_wake_when(None) == ()
    assert run_wakes.parse_wake_when([]) == ()
    assert run_wakes.parse_wake_when(["alert", {"metric": "loss", "below": 0.1}]) == (
        "alert",
        {"metric": "loss", "below": 0.1},
    )
    assert run_wakes.parse_wake_when("alert") == ("alert",)
    with pytest.raises(BadCondition, match="any_ended wakes the loop already"):
        run_wakes.parse_wake_when(["alert", "any_ended"])
    with pytest.raises(BadCondition, match="needs one of below or above"):
        run_wakes.parse_wake_when([{"metric": "loss"}])


class FakeRuns:
    """A run port whose runs a test moves; `fail` makes its reads raise."""

    def __init__(self, states: dict[str, RunState]):
        self.states, self.fail = states, False

    def run_states(self, *, run_ids):
        if self.fail:
            raise ConnectionError("the database is away")
        return {r: self.states[r] for r in run_ids if r in self.states}

    def runs_news_dsn(self):
        return None


class FakeLoop:
    id = "research-1"

    def __init__(self, runs):
        self.runs = runs


async def _seed_fast_waiters(runs: FakeRuns):
    """The event loop's shared waiters, judging every 50 ms (no LISTEN in a unit test)."""

    async def snapshot(run_ids):
        return runs.run_states(run_ids=run_ids)

    run_wakes._shared[asyncio.get_running_loop()] = RunWaiters(None, snapshot, recheck_s=0.05)


def test_an_alert_raised_since_the_loop_last_woke_wakes_it_an_older_one_does_not():
    async def scenario():
        runs = FakeRuns({"r-1": RunState("r-1", name="lr 0.1", status="running")})
        await _seed_fast_waiters(runs)
        since = time.time()
        runs.states["r-1"].last_alert = (since - 60, "warning", "old news")
        waiting = asyncio.ensure_future(
            run_wakes.woken_by_runs(FakeLoop(runs), ["r-1"], ("alert",), since=since, woken=[])
        )
        await asyncio.sleep(0.2)
        assert not waiting.done()
        runs.states["r-1"].last_alert = (time.time(), "critical", "loss spiked to 40\nmore")
        held = await asyncio.wait_for(waiting, 2)
        assert held.run_id == "r-1"
        assert held.reason == "run r-1 (lr 0.1) raised an alert (critical): loss spiked to 40"

    asyncio.run(scenario())


def test_a_metric_crossing_wakes_the_loop_once_a_run():
    async def scenario():
        states = {
            "r-1": RunState("r-1", status="running", metrics={"loss": (0.05, 900)}),
            "r-2": RunState("r-2", status="running", metrics={"loss": (0.9, 100)}),
        }
        runs = FakeRuns(states)
        await _seed_fast_waiters(runs)
        wake_when = ({"metric": "loss", "below": 0.1},)
        woken = [["r-1", "loss below 0.1"]]  # r-1's crossing woke the loop before
        waiting = asyncio.ensure_future(
            run_wakes.woken_by_runs(
                FakeLoop(runs), ["r-1", "r-2"], wake_when, since=time.time(), woken=woken
            )
        )
        await asyncio.sleep(0.2)
        assert not waiting.done()  # r-1 is below, but told already
        states["r-2"].metrics["loss"] = (0.08, 400)
        held = await asyncio.wait_for(waiting, 2)
        assert held.reason == "run r-2 reached loss 0.08 at step 400 (loss below 0.1)"

    asyncio.run(scenario())


def test_a_watch_that_cannot_read_is_logged_and_waits_on_without_failing_the_loop(caplog):
    async def scenario():
        runs = FakeRuns({"r-1": RunState("r-1", status="running")})
        runs.fail = True
        await _seed_fast_waiters(runs)
        waiting = asyncio.ensure_future(
            run_wakes.woken_by_runs(FakeLoop(runs), ["r-1"], ("alert",), since=0, woken=[])
        )
        await asyncio.sleep(0.3)
        assert not waiting.done()
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting

    asyncio.run(scenario())
    assert "could not watch its runs" in caplog.text


def test_no_conditions_or_no_run_port_never_wakes():
    async def scenario():
        for loop, wake_when in ((FakeLoop(None), ("alert",)), (FakeLoop(FakeRuns({})), ())):
            waiting = asyncio.ensure_future(
                run_wakes.woken_by_runs(loop, ["r-1"], wake_when, since=0, woken=[])
            )
            await asyncio.sleep(0.05)
            assert not waiting.done()
            waiting.cancel()

    asyncio.run(scenario())
