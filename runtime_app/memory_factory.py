"""The MemoryView runagentd gives its agents: memory_app's, waiting out database outages.

Agents write memory from their own processes (an executor stores its run's metrics rows, its
result, its alerts). A write that failed because PostgreSQL was restarting would be lost (a
metrics batch, an alert) or would fail a run that succeeded (its result); so every call
waits for the database instead, retrying with backoff. The run itself goes on meanwhile:
the agent's watchdog is what waits, and the run's metrics stay in its file until stored.

The calls run on a few threads of their own (MEMORY_THREADS a process), each keeping its
connection: executors run inside runagentd, and their calls come from whichever of its many
threads; each holding a connection would cost PostgreSQL a backend per thread, and a new
connection per call a backend per call (issue 25)."""

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

MEMORY_THREADS = 4
_threads: tuple[int, ThreadPoolExecutor] | None = None  # (pid, pool): made after any fork
_lock = threading.Lock()


class WaitingMemoryView:
    """Every method of the wrapped view, called through wait_for_database on a memory
    thread."""

    def __init__(self, view):
        self._view = view

    def __getattr__(self, name):
        value = getattr(self._view, name)
        if name.startswith("_") or not callable(value):
            return value
        return functools.partial(_on_a_memory_thread, value)


def _on_a_memory_thread(fn, /, *args, **kwargs):
    return _memory_threads().submit(wait_for_database, fn, *args, **kwargs).result()


def _memory_threads() -> ThreadPoolExecutor:
    global _threads
    with _lock:
        if _threads is None or _threads[0] != os.getpid():
            pool = ThreadPoolExecutor(MEMORY_THREADS, thread_name_prefix="agentsys-memory")
            _threads = (os.getpid(), pool)
        return _threads[1]


def memory_view(agent_id: str, role: str, scope: dict) -> WaitingMemoryView:
    # Built on the agent's event loop (runagentd's, or a worker's): the events its calls
    # record on the memory threads are published from that loop (see events.publish).
    with contextlib.suppress(RuntimeError):  # outside a loop: they are published as before
        publish_through(asyncio.get_running_loop())
    return WaitingMemoryView(DjangoMemoryView(agent_id, role, scope))
