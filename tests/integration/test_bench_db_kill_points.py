"""bench/db_kill.py's counts are taken from the right rows (issue 40 §3), without the kill: a
whole `serve` with its own PostgreSQL to kill costs far more than this suite gives one test,
and tests/e2e/test_database_death.py covers the kill itself. Here, on the real web and a real
runagentd over the test database, the bench's own functions:

- db_kill_runs_not_done counts over the bench's runs only (another run failing beside them is
  not one of them), each as its row says, once none of them is queued, running or paused;
- db_kill_runs_started_twice counts the runs whose own command ran more than once;
- db_kill_loop_going_at_the_kill and db_kill_loop_done read the row of the loop that
  `manage.py research start` said it started.

db_kill_to_first_201_s, a span across the kill, has no test here: see the report of issue 40."""

from __future__ import annotations

import subprocess

import httpx
import pytest

from agents_app.models import Agent
from agentsys.types import TERMINAL_AGENT_STATUSES
from bench import db_kill
from scheduler_app.models import Run
from tests.helpers import child_env, database_url_of_current_connection
from tests.live_clients import TOKEN, Web
from tests.runtime_harness import DaemonProcess

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
RUNS = 2


@pytest.fixture
def client(workdir):
    web = Web(AGENTSYS_WORKDIR=str(workdir))
    with httpx.Client(base_url=web.url, headers={"X-Auth-Token": TOKEN}, timeout=30) as http:
        yield http
    web.stop()


def _rows(ids: list[str]) -> list[str]:
    return [Run.objects.get(pk=run_id).status for run_id in ids]


def test_the_run_counts_read_the_bench_runs_rows_and_their_own_starts(client, workdir, tmp_path):
    starts = tmp_path / "starts"
    starts.mkdir()
    daemon = DaemonProcess("db-kill-points", AGENTSYS_WORKDIR=str(workdir))
    try:
        ids = [
            db_kill.created(client, db_kill.chaos_run(starts, i, seconds=0)) for i in range(RUNS)
        ]
        after = db_kill.created(client, {"name": "after", "command": "true", "auto_start": True})
        # Not the bench's: one of the loop's own runs, say.
        other = db_kill.created(client, {"name": "other", "command": "false", "auto_start": True})
        runs = db_kill.wait(lambda: db_kill.ended(client, [*ids, after, other]), 60, "the runs")
    finally:
        daemon.stop()
    assert _rows([other]) == ["failed"]
    runs = db_kill.ended(client, [*ids, after])
    assert [run["status"] for run in runs] == _rows([*ids, after]) == ["done"] * (RUNS + 1)
    assert db_kill.runs_not_done(runs) == 0  # the failed run beside them is not counted
    Run.objects.filter(pk=ids[0]).update(status="paused")
    assert db_kill.ended(client, [*ids, after]) is None  # a paused run has not ended
    Run.objects.filter(pk=ids[0]).update(status="lost")
    assert db_kill.runs_not_done(db_kill.ended(client, [*ids, after])) == 1
    # Each run's command noted its start in its own file, once.
    assert sorted(p.name for p in starts.iterdir()) == [str(i) for i in range(RUNS)]
    assert db_kill.started_twice(starts) == 0
    command = Run.objects.get(pk=ids[1]).command
    subprocess.run(command, shell=True, check=True)  # noqa: S602 (the run's own command again)
    assert db_kill.started_twice(starts) == 1


def test_the_loop_counts_read_the_row_of_the_loop_the_command_started(client, workdir):
    env = child_env(DATABASE_URL=database_url_of_current_connection(), AGENTSYS_WORKDIR=None)
    command, console = db_kill.started(env, "research", "start", "--workdir", str(workdir))
    assert command.wait(60) == 0, console.lines
    loop_id = db_kill.loop_id_of(console)
    assert Agent.objects.get(pk=loop_id).cls_path.endswith("ResearchAgent")
    # No runagentd here: the loop waits to be started, as one going would be.
    status = db_kill.loop_status(client, loop_id)
    assert status == Agent.objects.get(pk=loop_id).status
    assert status not in TERMINAL_AGENT_STATUSES
    Agent.objects.filter(pk=loop_id).update(status="failed")
    assert db_kill.loop_status(client, loop_id) in TERMINAL_AGENT_STATUSES
    assert db_kill.loop_status(client, loop_id) != "done"
    Agent.objects.filter(pk=loop_id).update(status="done")
    assert db_kill.loop_status(client, loop_id) == "done"
