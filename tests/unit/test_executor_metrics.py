"""An executor's metric rows reach the store exactly once, in order, whatever the timing: the
watchdog's read waiting out a database outage while the run ends, a stop in the middle of a
store, a store that fails. (Plain asyncio: a fake database stands for PostgreSQL behind both
the executor's ports, its run port and its memory.)"""

import asyncio
import json
import threading
from pathlib import Path

import pytest

from agentsys.agents.executor import ExecutorAgent


class OutageDatabase:
    """write_metrics waits while the database is down (as wait_for_database does), or raises
    once when `fail_next` is set; everything stored is kept, in order. When the database
    comes back, the caller that came last gets through first (it retries soonest: the others
    are deeper in their backoff) and the others a moment later."""

    def __init__(self) -> None:
        self.later: list[threading.Event] = []
        self.stored: list[int] = []
        self.down = False
        self.waiters: list[threading.Event] = []
        self.waiting = threading.Event()
        self.fail_next = False
        self._lock = threading.Lock()

    def write_metrics(self, *, rows, source="jsonl"):
        if self.fail_next:
            self.fail_next = False
            raise ConnectionError("the database went away")
        with self._lock:
            turn = threading.Event() if self.down else None
            if turn:
                self.waiters.append(turn)
        if turn:
            self.waiting.set()
            assert turn.wait(10), "the outage never ended"
        with self._lock:
            self.stored.extend(row["_step"] for row in rows)
        return len(rows)

    def come_back(self) -> None:
        """The database answers again: the newest waiter's retry gets through first."""
        with self._lock:
            self.down = False
            waiters, self.waiters = self.waiters, []
        if waiters:
            waiters.pop().set()
        self.later = waiters

    def release_the_rest(self) -> None:
        for turn in self.later:
            turn.set()

    def raise_alert(self, **_):
        return "alert"

    def run_code(self):
        return None  # no code recorded: the executor runs in its workdir


class EventLog:
    """The runtime's side of emit_event: the events an agent sent."""

    def __init__(self) -> None:
        self.events: list[tuple[str, dict]] = []

    def emit(self, agent, kind, payload) -> None:
        self.events.append((kind, payload))


def write_steps(path, steps) -> None:
    with path.open("a") as handle:
        for step in steps:
            handle.write(json.dumps({"_step": step, "loss": 1.0}) + "\n")


async def started_executor(tmp_path, database) -> ExecutorAgent:
    agent = ExecutorAgent()
    agent.id = "exec-metrics"
    agent.config = {"workdir": str(tmp_path), "command": "true"}
    agent.memory = agent.runs = database
    agent._link = EventLog()
    await agent.on_start()
    agent.run_dir.mkdir(parents=True)
    return agent


async def wait_for(event: threading.Event) -> None:
    assert await asyncio.to_thread(event.wait, 10)


async def test_the_last_read_waits_for_a_watchdog_read_held_up_by_an_outage(tmp_path):
    database = OutageDatabase()
    agent = await started_executor(tmp_path, database)
    metrics = agent.run_dir / "agent_metrics.jsonl"
    write_steps(metrics, range(1, 59))
    database.down = True
    watchdog = asyncio.create_task(agent.on_monitor())
    await wait_for(database.waiting)  # the watchdog holds rows 1-58, waiting to store them
    write_steps(metrics, range(59, 118))  # the run writes its last rows and exits

    last_read = asyncio.create_task(agent.on_monitor())
    await asyncio.sleep(0.2)
    assert not last_read.done(), "the run's last read finished while earlier rows waited"
    database.come_back()
    try:
        await asyncio.wait_for(last_read, 10)
        # The run is done here (its process may exit next): everything in the file is
        # stored, once each, in order.
        assert database.stored == list(range(1, 118))
    finally:
        database.release_the_rest()
        watchdog.cancel()
        await asyncio.gather(watchdog, return_exceptions=True)
    assert database.stored == list(range(1, 118))


async def test_a_stop_during_a_store_neither_loses_nor_repeats_rows(tmp_path):
    database = OutageDatabase()
    agent = await started_executor(tmp_path, database)
    metrics = agent.run_dir / "agent_metrics.jsonl"
    write_steps(metrics, range(10))
    database.down = True
    watchdog = asyncio.create_task(agent.on_monitor())
    await wait_for(database.waiting)
    watchdog.cancel()  # a stop while the rows are on their way to the database
    await asyncio.sleep(0.1)
    database.come_back()
    with pytest.raises(asyncio.CancelledError):
        await watchdog
    write_steps(metrics, range(10, 15))
    await agent.on_monitor()
    assert database.stored == list(range(15))
    # A re-adopted run starts where the stored rows end.
    saved = json.loads((agent.run_dir / "metrics.pos").read_text())
    assert saved["jsonl"]["offset"] == metrics.stat().st_size


async def test_rows_whose_store_failed_are_stored_by_the_next_read(tmp_path):
    database = OutageDatabase()
    agent = await started_executor(tmp_path, database)
    metrics = agent.run_dir / "agent_metrics.jsonl"
    write_steps(metrics, range(5))
    database.fail_next = True
    with pytest.raises(ConnectionError):
        await agent.on_monitor()
    assert database.stored == []
    assert not (agent.run_dir / "metrics.pos").exists()
    with metrics.open("a") as handle:
        handle.write("not json\n")
    write_steps(metrics, range(5, 7))
    await agent.on_monitor()
    assert database.stored == list(range(7))


async def test_a_store_cut_short_after_some_chunks_keeps_the_chunks_stored(tmp_path, monkeypatch):
    monkeypatch.setattr("agentsys.agents.run_watchdog.METRICS_CHUNK", 3)
    database = OutageDatabase()
    agent = await started_executor(tmp_path, database)
    metrics = agent.run_dir / "agent_metrics.jsonl"
    write_steps(metrics, range(7))
    calls = 0
    original = database.write_metrics

    def third_call_fails(*, rows, source="jsonl"):
        nonlocal calls
        calls += 1
        if calls == 3:
            raise ConnectionError("gone")
        return original(rows=rows, source=source)

    database.write_metrics = third_call_fails
    with pytest.raises(ConnectionError):
        await agent.on_monitor()
    assert database.stored == list(range(6))
    await agent.on_monitor()
    assert database.stored == list(range(7))


async def test_a_re_adopted_run_resumes_from_a_position_saved_before_there_were_sources(tmp_path):
    """metrics.pos written by an executor of an earlier version (`<offset> <inode>`)."""
    database = OutageDatabase()
    first = await started_executor(tmp_path, database)
    metrics = first.run_dir / "agent_metrics.jsonl"
    write_steps(metrics, range(3))
    stored_up_to = metrics.stat().st_size
    (first.run_dir / "metrics.pos").write_text(f"{stored_up_to} {metrics.stat().st_ino}")
    write_steps(metrics, range(3, 5))
    again = ExecutorAgent()
    again.id, again._link = first.id, EventLog()
    again.memory = again.runs = database
    again.config = {"workdir": str(tmp_path), "command": "true", "resume": True}
    await again.on_start()
    await again.on_monitor()
    assert database.stored == [3, 4]
    assert json.loads((again.run_dir / "metrics.pos").read_text())["jsonl"]["offset"] == (
        metrics.stat().st_size
    )


async def test_lines_that_are_not_json_objects_are_said_once_and_skipped(tmp_path):
    database = OutageDatabase()
    agent = await started_executor(tmp_path, database)
    metrics = agent.run_dir / "agent_metrics.jsonl"
    metrics.write_text('not json\n[1, 2]\n{"_step": 1, "loss": 2.0}\nalso bad\n')
    await agent.on_monitor()
    await agent.on_monitor()
    assert database.stored == [1]
    problems = [payload for kind, payload in agent._link.events if kind == "metrics_problem"]
    assert len(problems) == 1 and problems[0]["source"] == "jsonl"


async def test_a_source_that_raises_is_said_once_and_the_others_go_on(tmp_path):
    database = OutageDatabase()
    agent = await started_executor(tmp_path, database)

    class Broken:
        name, problems = "tensorboard", []

        def peek(self):
            raise RuntimeError("a bug in a reader")

        def advance(self, count): ...
        def position(self):
            return {}

    agent.metrics.sources.insert(0, Broken())
    write_steps(agent.run_dir / "agent_metrics.jsonl", range(2))
    await agent.on_monitor()
    await agent.on_monitor()
    assert database.stored == [0, 1]
    problems = [payload for kind, payload in agent._link.events if kind == "metrics_problem"]
    assert problems == [
        {
            "source": "tensorboard",
            "problem": "could not be read (RuntimeError: a bug in a reader); retried each time",
        }
    ]


async def test_a_pause_before_the_executor_has_started_suspends_nothing_and_is_not_refused():
    # runagentd starts an executor with the claim that places it: a pause may come first.
    agent = ExecutorAgent()
    agent.id = "exec-paused-early"
    agent.config = {"command": "true"}
    agent._link = EventLog()
    await agent.on_pause()
    await agent.on_resume()
    assert [kind for kind, _ in agent._link.events] == ["run_paused", "run_resumed"]


async def test_a_row_written_wakes_the_next_look_and_a_stop_closes_the_watch(tmp_path, monkeypatch):
    """Issue 39: the executor looks when its run's metrics file changes (its 60 s timer here
    is never waited for), and its end leaves no inotify fd behind."""
    monkeypatch.delenv("AGENTSYS_METRICS_WATCH", raising=False)
    fds = len(list(Path("/proc/self/fd").iterdir()))
    database = OutageDatabase()
    agent = await started_executor(tmp_path, database)
    agent.monitor_interval = 60.0
    await agent.changes.armed()
    await agent.until_next_look()  # the look a start gets: files may predate the watch
    write_steps(agent.run_dir / "agent_metrics.jsonl", range(3))
    await asyncio.wait_for(agent.until_next_look(), 10)
    await agent.on_monitor()
    assert database.stored == [0, 1, 2]
    await agent.on_stop()
    assert len(list(Path("/proc/self/fd").iterdir())) <= fds


async def test_forced_onto_the_timer_the_executor_watches_no_file(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTSYS_METRICS_WATCH", "timer")
    agent = await started_executor(tmp_path, OutageDatabase())
    assert agent.changes is None
    await agent.on_stop()
