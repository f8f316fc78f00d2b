"""The MemoryView runagentd gives its agents: memory_app's, waiting out database outages.

Agents write memory from their own processes (an executor stores its run's metrics rows, its
result, its alerts). A write that failed because PostgreSQL was restarting would be lost (a
metrics batch, an alert) or would fail a run that succeeded (its result); so every call
waits for the database instead, retrying with backoff. The run itself goes on meanwhile:
the agent's watchdog is what waits, and the run's metrics stay in its file until stored."""

from __future__ import annotations

import functools

from common.db_outage import wait_for_database
from runtime_app.memory_view import DjangoMemoryView


class WaitingMemoryView:
    """Every method of the wrapped view, called through wait_for_database."""

    def __init__(self, view):
        self._view = view

    def __getattr__(self, name):
        value = getattr(self._view, name)
        if name.startswith("_") or not callable(value):
            return value
        return functools.partial(wait_for_database, value)


def memory_view(agent_id: str, role: str, scope: dict) -> WaitingMemoryView:
    return WaitingMemoryView(DjangoMemoryView(agent_id, role, scope))
