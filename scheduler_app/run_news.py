"""News of runs for those waiting on them (agentsys.run_waiters): `NOTIFY agentsys_runs`
with a run's id, sent in the transaction that stores its metrics, moves its status or raises
its alert, so it is delivered at commit (and not at all on a rollback). One statement for
all the runs of a write; a path that sends none is still seen by the waiters' recheck."""

from __future__ import annotations

from django.db import connection

from agentsys.run_waiters import RUNS_CHANNEL


def runs_changed(run_ids: list[str]) -> None:
    """News of these runs."""
    if run_ids:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_notify(%s, id) FROM unnest(%s::varchar[]) AS id",
                [RUNS_CHANNEL, list(run_ids)],
            )


def runs_of_agents_changed(agent_ids: list[str]) -> None:
    """News of the runs of these executors (a status moves with its executor's)."""
    if agent_ids:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_notify(%s, id) FROM scheduler_app_run WHERE agent_id = ANY(%s)",
                [RUNS_CHANNEL, list(agent_ids)],
            )
