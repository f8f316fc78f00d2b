"""The database server restarted under load (tests/e2e/postgres_restart_cases.py: a runagentd
with an agent and two GPU runs writing metrics, a daphne, a WebSocket and an SSE client;
everything back within 10 s, nothing lost or stored twice), run in a child pytest whose whole
suite is on a server of its own: the embedded PostgreSQL of a home made for it, and the system
PostgreSQL restarted with pg_ctlcluster. The suite's own server, which every worker's test
database is on, is never restarted: these run beside the other modules."""

from __future__ import annotations

import os
import sys

import psycopg
import pytest
from django.conf import settings

from tests.helpers import child_env, child_pytest

CASES = "tests/e2e/postgres_restart_cases.py"
EXTERNAL_URL = os.environ.get(
    "AGENTSYS_TEST_EXTERNAL_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)


def _run_cases(env: dict[str, str | None], *cases: str) -> str:
    """The cases in a child pytest with `env`; its figures line (stderr's last)."""
    result = child_pytest("-s", *cases, env=child_env(**env), timeout=400)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    assert " passed" in result.stdout and "skipped" not in result.stdout, result.stdout[-2000:]
    return result.stderr.strip().splitlines()[-1] if result.stderr.strip() else ""


# A child pytest with its own database server: about a minute here, more on a busy machine.
@pytest.mark.timeout(420)
def test_an_embedded_postgres_restarted_under_load(embedded_home):
    """Both cases on an embedded PostgreSQL of their own (AGENTSYS_HOME: a new home, no
    DATABASE_URL): the child's `postgres` fixture stops and starts that server."""
    figures = _run_cases({"AGENTSYS_HOME": str(embedded_home), "DATABASE_URL": None}, CASES)
    print(figures, file=sys.stderr)


@pytest.mark.timeout(420)
def test_external_postgres_restart(embedded_home):
    """The recovery case on the system PostgreSQL (CI: 127.0.0.1:5432), restarted with
    pg_ctlcluster."""
    if settings.EMBEDDED_POSTGRES is None:
        pytest.skip("this run already uses an external database")
    ctl = os.environ.get("AGENTSYS_TEST_PG_CTL", "pg_ctlcluster 15 main")
    try:
        psycopg.connect(EXTERNAL_URL, connect_timeout=5).close()
    except psycopg.OperationalError as exc:
        pytest.fail(f"no external PostgreSQL at {EXTERNAL_URL} ({exc})")
    case = f"{CASES}::test_everything_recovers_from_a_restart_and_an_outage"
    env = {
        "DATABASE_URL": EXTERNAL_URL,
        "AGENTSYS_HOME": str(embedded_home),
        "AGENTSYS_TEST_PG_CTL": ctl,
    }
    print(_run_cases(env, case), file=sys.stderr)
