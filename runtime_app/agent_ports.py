"""The ports runagentd gives its agents, memory (runtime_app/memory_view.py) and runs
(runtime_app/run_port.py), both waiting out database outages.

Agents write from their own processes (an executor stores its run's metrics rows and log,
its result, its alerts). A write that failed because PostgreSQL was restarting would be lost
(a metrics batch, an alert) or would fail a run that succeeded (its result); so every call
waits for the database instead, retrying with backoff. The run itself goes on meanwhile:
the agent's watchdog is what waits, and the run's metrics stay in its file until stored.

The calls of both ports run on a few threads of their own (DATABASE_THREADS a process),
each keeping its connection: executors run inside runagentd, and their calls come from
whichever of its many threads; each holding a connection would cost PostgreSQL a backend
per thread, and a new connection per call a backend per call (issue 25)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import threading
from concurrent.futures import ThreadPoolExecutor

from common.db_outage import wait_for_database
from events_app.events import publish_through
from runtime_app.memory_view import DjangoMemoryView
from runtime_app.run_port import DjangoRunPort

DATABASE_THREADS = 4
_threads: tuple[int, ThreadPoolExecutor] | None = None  # (pid, pool): made after any fork
_lock = threading.Lock()


class WaitingPort:
    """Every method of the wrapped port, called through wait_for_database on a database
    thread."""

    def __init__(self, port):
        self._port = port

    def __getattr__(self, name):
        value = getattr(self._port, name)
        if name.startswith("_") or not callable(value):
            return value
        return functools.partial(_on_a_database_thread, value)


def _on_a_database_thread(fn, /, *args, **kwargs):
    return _database_threads().submit(wait_for_database, fn, *args, **kwargs).result()


def _database_threads() -> ThreadPoolExecutor:
    global _threads
    with _lock:
        if _threads is None or _threads[0] != os.getpid():
            pool = ThreadPoolExecutor(DATABASE_THREADS, thread_name_prefix="agentsys-memory")
            _threads = (os.getpid(), pool)
        return _threads[1]


def _publish_from_this_loop() -> None:
    # Built on the agent's event loop (runagentd's, or a worker's): the events its calls
    # record on the database threads are published from that loop (see events.publish).
    with contextlib.suppress(RuntimeError):  # outside a loop: they are published as before
        publish_through(asyncio.get_running_loop())


def memory_view(agent_id: str, role: str, scope: dict) -> WaitingPort:
    _publish_from_this_loop()
    return WaitingPort(DjangoMemoryView(agent_id, role, scope))


def run_port(agent_id: str, role: str, scope: dict) -> WaitingPort:
    """The agent's RunPort; `role` is unused (a run's rows say who wrote them by agent id),
    taken to match the factory signature agentsys.port_wiring calls."""
    _publish_from_this_loop()
    return WaitingPort(DjangoRunPort(agent_id, scope.get("run") or ""))
