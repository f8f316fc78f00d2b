"""The change watch an executor looks on (agentsys.metric_sources.changes): a metric file
written wakes it, in a folder made after it started too, by inotify and by the stat poll;
files no source reads do not; a writer of 1,000 rows/s costs a bounded number of looks and
its last row is never left for the timer; closing leaves no fd and no task."""

import asyncio
import itertools
import os
import threading
import time
from pathlib import Path

import pytest

from agentsys.metric_sources.base import Watched
from agentsys.metric_sources.changes import ChangeWatch

LONG = 30.0  # a backstop no test waits for: a look it sees came from a change
SHORT = 0.6  # a backstop that ends a wait a change should not have ended


def run(coro):
    return asyncio.run(coro)


def append(path: Path, text: str = '{"loss": 1}\n') -> None:
    with open(path, "a") as out:
        out.write(text)


async def woken_by(watch: ChangeWatch, change, backstop: float = LONG) -> bool:
    """Whether `change` (done once the watch is started and its first look is over) wakes
    the next look before the backstop."""
    await watch.armed()
    await watch.next_look(0)  # the look a start always gets (files may predate the watch)
    await asyncio.to_thread(change)
    async with asyncio.timeout(10):
        return await watch.next_look(backstop)


@pytest.fixture(params=[False, True], ids=["inotify", "poll"])
def poll(request):
    return request.param


def test_an_appended_metrics_file_wakes_the_look(tmp_path, poll):
    metrics = tmp_path / "agent_metrics.jsonl"
    metrics.write_text("")

    async def main():
        watch = ChangeWatch([Watched(tmp_path, names=frozenset({metrics.name}))], poll=poll)
        try:
            return await woken_by(watch, lambda: append(metrics))
        finally:
            await watch.close()

    assert run(main()) is True


def test_a_file_no_source_reads_wakes_nothing(tmp_path, poll):
    async def main():
        places = [
            Watched(tmp_path, names=frozenset({"agent_metrics.jsonl"})),
            Watched(tmp_path / "work", recursive=True, skip=frozenset({".git"})),
        ]
        (tmp_path / "work" / ".git").mkdir(parents=True)
        watch = ChangeWatch(places, poll=poll)
        try:

            def unrelated():
                append(tmp_path / "metrics.pos")
                append(tmp_path / "work" / ".git" / "index")

            return await woken_by(watch, unrelated, backstop=SHORT)
        finally:
            await watch.close()

    assert run(main()) is False


def test_printed_lines_no_longer_read_wake_no_look(tmp_path, poll):
    """Once a structured source has rows, the log is not read: a progress bar in it must
    not make looks."""
    log = tmp_path / "job.log"
    jsonl = Watched(tmp_path, names=frozenset({"agent_metrics.jsonl"}))

    async def main():
        watch = ChangeWatch([jsonl, Watched(tmp_path, names=frozenset({log.name}))], poll=poll)
        try:
            before = await woken_by(watch, lambda: append(log, "step 1 loss 2\n"))
            watch.watch([jsonl])
            after = await woken_by(watch, lambda: append(log, "step 2 loss 2\n"), SHORT)
            return before, after
        finally:
            await watch.close()

    assert run(main()) == (True, False)


def test_a_file_in_a_folder_made_later_wakes_the_look(tmp_path, poll):
    """mlruns/<experiment>/<run>/metrics/loss: none of it there when the run starts."""
    store = tmp_path / "mlruns"
    metric = store / "0" / "abc" / "metrics" / "loss"

    def make_it():
        metric.parent.mkdir(parents=True)
        append(metric, "1 0.5 0\n")

    async def main():
        watch = ChangeWatch([Watched(store, recursive=True)], poll=poll)
        try:
            first = await woken_by(watch, make_it)
            # Its folder is watched now: an append alone wakes the next look.
            await asyncio.sleep(0.3)
            then = await woken_by(watch, lambda: append(metric, "1 0.4 1\n"))
            return first, then, watch.take_new_files()
        finally:
            await watch.close()

    first, then, _ = run(main())
    assert (first, then) == (True, True)


def test_a_fast_writer_costs_bounded_looks_and_its_last_row_is_looked_at(tmp_path):
    metrics = tmp_path / "agent_metrics.jsonl"
    metrics.write_text("")
    done = threading.Event()
    last_write: list[float] = []

    def writer():
        with open(metrics, "a", buffering=1) as out:
            for step in range(1000):  # 1,000 rows in about a second
                out.write(f'{{"_step": {step}}}\n')
                if step % 10 == 0:
                    time.sleep(0.01)
        last_write.append(time.monotonic())
        done.set()

    async def main():
        watch = ChangeWatch([Watched(tmp_path, names=frozenset({metrics.name}))], min_gap=0.15)
        looks = []
        try:
            await watch.armed()
            await watch.next_look(0)
            thread = threading.Thread(target=writer)
            started = time.monotonic()
            thread.start()
            while not done.is_set() or not looks or looks[-1] < last_write[0]:
                async with asyncio.timeout(10):
                    if await watch.next_look(LONG):
                        looks.append(time.monotonic())
            thread.join()
            return looks, time.monotonic() - started
        finally:
            await watch.close()

    looks, seconds = run(main())
    # At most one look per min_gap (and the one after the last write), yet one after it.
    assert 2 <= len(looks) <= seconds / 0.15 + 2
    assert all(b - a >= 0.14 for a, b in itertools.pairwise(looks))
    assert looks[-1] >= last_write[0]


def test_a_change_during_a_look_makes_the_next_one(tmp_path):
    metrics = tmp_path / "agent_metrics.jsonl"
    metrics.write_text("")

    async def main():
        watch = ChangeWatch([Watched(tmp_path, names=frozenset({metrics.name}))], min_gap=0)
        try:
            assert await woken_by(watch, lambda: append(metrics))
            # The look is under way (this code runs between next_look calls): a row now
            await asyncio.to_thread(append, metrics)
            await asyncio.sleep(0.2)
            async with asyncio.timeout(10):
                return await watch.next_look(LONG)
        finally:
            await watch.close()

    assert run(main()) is True


def test_close_leaves_no_fd_and_no_task(tmp_path, poll):
    def fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    async def main():
        before = fds()
        watch = ChangeWatch([Watched(tmp_path, recursive=True)], poll=poll)
        await watch.next_look(0)
        await watch.close()
        await asyncio.sleep(0.05)
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        return before, fds(), others

    before, after, others = run(main())
    assert after <= before
    assert others == []
