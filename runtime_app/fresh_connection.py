"""The database connection an agent's port calls hold: kept while healthy, dropped after an
error. Shared by the memory port (runtime_app/memory_view.py) and the run port
(runtime_app/run_port.py), whose calls come from the same threads."""

from __future__ import annotations

from django.db import connection

from common.db_outage import is_database_unavailable


class fresh_connection:
    """Agents call from threads that outlive a broken connection: drop it after an error.
    A healthy one is kept: executors run inside runagentd, and a new connection for each
    write (Django's CONN_MAX_AGE=0 outside requests) cost a PostgreSQL backend per metrics
    batch and per result (issue 25)."""

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, traceback):
        broken = connection.errors_occurred or is_database_unavailable(exc)
        if broken and not connection.in_atomic_block:  # in a caller's transaction: theirs
            connection.close()
        return False
