"""One snapshot of a workdir's code for the runs submitted at the same moment.

Recording a run's code starts git three times (~8 ms). A script that submits hundreds of runs
from many threads at once would start git hundreds of times for the same state of the same
work tree. Here the requests for one workdir share a snapshot, under one rule that keeps each
run's code right: a request is given only a snapshot that *started after it arrived*, so it
shows the work tree as it was when the run was asked for, or newer. While a snapshot is being
taken, the requests that arrive wait for the next one, which one of them then takes for all.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class _Flight:
    done: bool = False
    result: Any = None
    error: BaseException | None = None


@dataclass
class _Workdir:
    running: _Flight | None = None
    next: _Flight | None = None
    users: int = 0


@dataclass
class SharedSnapshots:
    take: Callable[[str], Any]  # the snapshot of one workdir (code_snapshot.take)
    _lock: threading.Condition = field(default_factory=threading.Condition)
    _workdirs: dict[str, _Workdir] = field(default_factory=dict)

    def __call__(self, workdir: str):
        with self._lock:
            state = self._workdirs.setdefault(workdir, _Workdir())
            state.users += 1
            if state.next is None:
                state.next = _Flight()
            flight = state.next  # starts after now: it shows what this request must see
            while not flight.done and not (state.running is None and state.next is flight):
                self._lock.wait()
            lead = not flight.done
            if lead:
                state.running, state.next = flight, None
        if lead:
            try:
                flight.result = self.take(workdir)
            except BaseException as error:  # every request sharing it gets the same error
                flight.error = error
        with self._lock:
            if lead:
                flight.done, state.running = True, None
                self._lock.notify_all()
            state.users -= 1
            if state.users == 0:
                self._workdirs.pop(workdir, None)
        if flight.error is not None:
            raise flight.error
        return flight.result
