"""wait_runs's conditions (agentsys.run_waits): what a caller may send, what each one means
over runs, and the words and data a woken wait answers with; and the waiters of a process
(agentsys.run_waiters) woken by news of their runs, one read for many of them."""

from __future__ import annotations

import asyncio
import math
import time

import pytest

from agentsys.run_waiters import RunWaiters
from agentsys.run_waits import BadCondition, RunState, first_held, parse_until, timed_out

NOW = 1_000_000.0


def run(run_id="run-a", status="running", **metrics):
    return RunState(run_id, name=run_id[-1], status=status, metrics=metrics)


@pytest.mark.parametrize(
    ("until", "words"),
    [
        ("all_done", "'all_done' is not a condition; the words are any_ended, all_ended"),
        ([], "empty list"),
        (["failed"] * 11, "at most 10"),
        (3, "not int"),
        ({"metric": "loss"}, "needs one of below or above"),
        ({"metric": "loss", "below": 1, "above": 2}, "needs one of below or above"),
        ({"metric": "loss", "below": "0.1"}, "below of loss must be a finite number"),
        ({"metric": "loss", "above": math.inf}, "finite"),
        ({"metric": "loss", "below": True}, "finite"),
        ({"metric": "", "below": 1}, "metric must be a metric's name"),
        ({"metric": "loss", "under": 1}, "under is not a key"),
    ],
)
def test_a_bad_condition_is_refused_naming_what_is_wrong(until, words):
    with pytest.raises(BadCondition, match="until") as refused:
        parse_until(until)
    assert words in str(refused.value)


def test_conditions_parse_and_say_themselves():
    parsed = parse_until(["all_ended", {"metric": "loss", "below": 0.1}])
    assert [c.as_data() for c in parsed] == ["all_ended", {"metric": "loss", "below": 0.1}]
    assert timed_out(parsed, 30) == "timed out after 30 s; none of all_ended; loss below 0.1 held"


def test_a_metric_below_wakes_on_the_run_whose_last_value_crossed():
    until = parse_until({"metric": "loss", "below": 0.1})
    runs = [run("run-a", loss=(0.5, 300)), run("run-b", loss=(0.2, 300))]
    assert first_held(until, runs, NOW) is None
    runs[1].metrics["loss"] = (0.08, 400)
    held = first_held(until, runs, NOW)
    assert held.as_data() == {
        "woke": True,
        "reason": "run run-b (b) reached loss 0.08 at step 400 (loss below 0.1)",
        "condition": {"metric": "loss", "below": 0.1},
        "run_id": "run-b",
    }


def test_above_uses_the_last_value_and_nan_crosses_nothing():
    until = parse_until({"metric": "loss", "above": 3})
    assert first_held(until, [run(loss=(2.9, 10))], NOW) is None
    assert first_held(until, [run(loss=(math.nan, 11))], NOW) is None
    assert first_held(until, [run(loss=(3.5, 12))], NOW).run_id == "run-a"
    assert first_held(until, [run(lr=(9.0, 12))], NOW) is None  # another metric


def test_ended_failed_and_all_ended():
    runs = [run("run-a", "done"), run("run-b", "running")]
    assert first_held(parse_until("any_ended"), runs, NOW).reason == "run run-a (a) ended: done"
    assert first_held(parse_until("all_ended"), runs, NOW) is None
    assert first_held(parse_until("failed"), runs, NOW) is None
    runs[1].status, runs[1].exit_code, runs[1].error = "failed", 1, "Traceback\nboom"
    failed = first_held(parse_until("failed"), runs, NOW)
    assert failed.reason == "run run-b (b) failed: failed, exit code 1: Traceback"
    every = first_held(parse_until("all_ended"), runs, NOW)
    assert (every.run_id, every.reason) == (None, "all 2 runs ended: 1 done, 1 failed")


def test_an_alert_counts_only_when_raised_after_the_wait_began():
    old = run()
    old.last_alert = (NOW - 5, "critical", "NaN loss at step 41")
    assert first_held(parse_until("alert"), [old], NOW) is None
    old.last_alert = (NOW + 1, "warning", "Loss spike\nmore")
    said = first_held(parse_until("alert"), [old], NOW).reason
    assert said == "run run-a (a) raised an alert (warning): Loss spike"


def test_the_first_condition_in_the_list_that_holds_is_the_one_said():
    runs = [run("run-a", "done", loss=(0.05, 9))]
    held = first_held(parse_until([{"metric": "loss", "below": 0.1}, "any_ended"]), runs, NOW)
    assert held.condition.kind == "metric"


def test_a_summary_says_nan_as_a_string_for_json():
    assert run(loss=(math.nan, 3)).summary()["metrics"] == {"loss": {"last": "nan", "step": 3}}


class Store:
    """Runs as a snapshot reads them, counting the reads."""

    def __init__(self, runs):
        self.runs = {r.id: r for r in runs}
        self.reads = 0

    async def snapshot(self, run_ids):
        self.reads += 1
        await asyncio.sleep(0)
        return {i: RunState(**vars(self.runs[i])) for i in run_ids if i in self.runs}


def test_waiters_wake_on_news_of_their_run_with_one_read_for_all_of_them():
    async def scenario():
        store = Store([run("run-a", loss=(1.0, 1)), run("run-b")])
        waiters = RunWaiters(None, store.snapshot, recheck_s=60)
        until = parse_until({"metric": "loss", "below": 0.5})
        waits = [
            asyncio.create_task(waiters.wait(["run-a", "run-b"], until, 30)) for _ in range(100)
        ]
        await asyncio.sleep(0.05)
        assert waiters.waiting == 100 and store.reads == 100  # each one's first look
        waiters.heard("run-x")  # news of a run nobody waits on: nothing read
        store.runs["run-a"].metrics["loss"] = (0.4, 2)
        started = time.monotonic()
        waiters.heard("run-a")
        waiters.heard("run-a")
        outcomes = await asyncio.gather(*waits)
        assert time.monotonic() - started < 0.5
        assert store.reads == 101 and waiters.reads == 1  # one read woke all 100
        assert {o.held.run_id for o in outcomes} == {"run-a"}
        assert waiters.waiting == 0

    asyncio.run(scenario())


def test_a_wait_times_out_saying_so_and_one_already_true_returns_at_once():
    async def scenario():
        store = Store([run("run-a", "done")])
        waiters = RunWaiters(None, store.snapshot, recheck_s=60)
        started = time.monotonic()
        held = await waiters.wait(["run-a"], parse_until("any_ended"), 30)
        assert held.held.run_id == "run-a" and time.monotonic() - started < 0.5
        late = await waiters.wait(["run-a"], parse_until("failed"), 0.2)
        assert late.held is None and [r.status for r in late.runs] == ["done"]
        assert waiters.waiting == 0

    asyncio.run(scenario())


def test_the_recheck_finds_what_no_news_announced():
    async def scenario():
        store = Store([run("run-a")])
        waiters = RunWaiters(None, store.snapshot, recheck_s=0.1)
        waiting = asyncio.create_task(waiters.wait(["run-a"], parse_until("any_ended"), 5))
        await asyncio.sleep(0.05)
        store.runs["run-a"].status = "stopped"  # written by a path that sent no NOTIFY
        outcome = await waiting
        assert outcome.held.reason == "run run-a (a) ended: stopped"

    asyncio.run(scenario())
