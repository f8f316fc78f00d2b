"""The suite also passes with DATABASE_URL pointing at an external PostgreSQL, and then
nothing embedded starts. `make test` runs on the embedded server; this test reruns the
database-facing tests against the external one (on CI: 127.0.0.1:5432, trust auth)."""

import os

import psycopg
import pytest

from tests.helpers import child_env, child_pytest

pytestmark = pytest.mark.slow

EXTERNAL_URL = os.environ.get(
    "AGENTSYS_TEST_EXTERNAL_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
# The tests that lean on PostgreSQL itself rather than on the ORM: the queue's SKIP LOCKED
# claims, the channel layer's LISTEN/NOTIFY, the durable event log and its replay, many runs
# in one transaction, a killed connection, runagentd registering and waking on NOTIFY. (The
# admin pages and the auth matrix, rerun here before, are views over the ORM: 3/4 of the time.)
DATABASE_SUITES = [
    "tests/integration/test_scheduler_queue.py",
    "tests/integration/test_channel_layer.py",
    "tests/integration/test_event_feed.py",
    "tests/integration/test_run_batch.py",
    "tests/integration/test_db_outage.py",
    "tests/integration/test_runagentd.py",
]


# Whole test files in a child pytest: about a minute on an idle machine, several on a busy
# one; its own subprocess timeout (480 s) is the real bound.
@pytest.mark.timeout(540)
def test_database_suites_pass_on_external_postgres(tmp_path):
    try:
        psycopg.connect(EXTERNAL_URL, connect_timeout=5).close()
    except psycopg.OperationalError as exc:
        pytest.fail(
            f"no external PostgreSQL at {EXTERNAL_URL} ({exc}); start one or point "
            "AGENTSYS_TEST_EXTERNAL_DATABASE_URL at one"
        )
    home = tmp_path / "home"
    env = child_env(DATABASE_URL=EXTERNAL_URL, AGENTSYS_HOME=str(home))
    result = child_pytest(*DATABASE_SUITES, env=env, timeout=480)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and " failed" not in result.stdout
    assert not (home / "pgdata").exists()  # no embedded server was started
