"""Runs submitted together share a snapshot of their workdir, but never one taken before
they were asked for."""

import threading
import time

import pytest

from agentsys.shared_snapshot import SharedSnapshots


def test_each_request_gets_a_snapshot_started_after_it_arrived_and_bursts_share_them():
    starts = []

    def take(workdir):
        started = time.monotonic()
        starts.append(started)
        time.sleep(0.02)
        return (workdir, started)

    shared = SharedSnapshots(take)
    results, lock = [], threading.Lock()

    def request():
        arrived = time.monotonic()
        result = shared("/w")
        with lock:
            results.append((arrived, result))

    threads = [threading.Thread(target=request) for _ in range(40)]
    for thread in threads:
        thread.start()
        time.sleep(0.001)
    for thread in threads:
        thread.join(5)
    assert len(results) == 40
    for arrived, (workdir, started) in results:
        assert workdir == "/w" and started >= arrived  # never an older state of the tree
    assert len(starts) < 20  # a burst shares snapshots: git ran far fewer times than asked
    assert shared._workdirs == {}  # nothing kept once nobody waits


def test_workdirs_do_not_share_and_an_error_reaches_everyone_who_shared_it():
    def take(workdir):
        time.sleep(0.01)
        if workdir == "/bad":
            raise ValueError("git failed")
        return workdir

    shared = SharedSnapshots(take)
    assert shared("/a") == "/a" and shared("/b") == "/b"
    errors = []

    def request():
        try:
            shared("/bad")
        except ValueError as error:
            errors.append(str(error))

    threads = [threading.Thread(target=request) for _ in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    assert errors == ["git failed"] * 5
    with pytest.raises(ValueError):
        shared("/bad")
