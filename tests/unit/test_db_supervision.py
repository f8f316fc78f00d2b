"""`serve`'s watch on the embedded database (researchagent/db_supervision.py), on a stand-in for the
server: the children's backoff and give-up rule applies to it too. The real kill -9 under
`make run`: tests/e2e/test_database_death.py."""

from __future__ import annotations

import logging
from pathlib import Path

from researchagent.db_supervision import EmbeddedDatabaseWatch
from researchagent.restart_policy import RestartPolicy


class Server:
    """Runs until `die`; `start_server` fails while `broken`."""

    def __init__(self, tmp: Path):
        self.pgdata = tmp
        self.pid: int | None = 100
        self.broken = False
        self.starts = 0

    def running_pid(self):
        return self.pid

    def die(self):
        (self.pgdata / "postmaster.pid").write_text("100\n")  # left behind, as by a SIGKILL
        self.pid = None

    def start_server(self):
        self.starts += 1
        if self.broken:
            raise RuntimeError("pg_ctl: could not start server\nsee the log")
        self.pid = 200 + self.starts


def test_a_dead_server_is_restarted_after_the_backoff_and_said(tmp_path, caplog):
    server = Server(tmp_path)
    watch = EmbeddedDatabaseWatch(server, RestartPolicy())
    caplog.set_level(logging.WARNING, logger="agentsys.serve")
    assert watch.check(0.0) and server.starts == 0
    server.die()
    assert watch.check(100.0)  # noticed; a server that ran 100 s restarts after first_delay
    assert watch.check(100.4) and server.starts == 0
    assert watch.check(100.5) and server.starts == 1 and server.running_pid() == 201
    said = caplog.text
    assert "PostgreSQL (pid 100) was killed or crashed" in said
    assert "restarting it in 0.5s" in said
    assert "PostgreSQL is back (pid 201)" in said


def test_a_server_that_will_not_start_makes_serve_give_up(tmp_path, caplog):
    server = Server(tmp_path)
    watch = EmbeddedDatabaseWatch(server, RestartPolicy(max_fast_crashes=3))
    server.broken = True
    server.die()
    now, results = 0.0, []
    for _ in range(200):
        now += 0.1
        results.append(watch.check(now))
        if not results[-1]:
            break
    assert results[-1] is False  # gave up
    assert server.starts == 2  # backoff 0.5, then 1.0; the third failure is the last
    assert "PostgreSQL did not start (pg_ctl: could not start server)" in caplog.text
    assert "giving up and stopping AgentSys" in caplog.text
