"""libpq conninfo of Django's database, for a LISTEN connection of its own (psycopg async,
outside Django): runagentd's wake-ups and the web's run waiters (scheduler_app.run_waits)."""

from __future__ import annotations

import psycopg
from django.db import connection


def listen_dsn() -> str:
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    return psycopg.conninfo.make_conninfo(**{k: v for k, v in params.items() if v})
