"""`serve` keeps the database up like its other children (issue 34): the embedded PostgreSQL
is restarted when its postmaster dies, under the children's backoff and give-up rule; an
external one (DATABASE_URL) cannot be started from here, so its absence is said and waited for.

Both are checked from `serve`'s supervising loop, every tick. Nothing else would bring the
embedded server back: every process took its lease at start, and only a new process's
`acquire` starts a server that is not running.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime

import psycopg

from researchagent.embedded_db import EmbeddedPostgres
from researchagent.restart_policy import RestartPolicy

logger = logging.getLogger("agentsys.serve")
PROBE_SECONDS = 0.5  # how often an external database is asked whether it answers
CONNECT_TIMEOUT_SECONDS = 2  # libpq's least
TCP_USER_TIMEOUT_MS = 3000


def _clock() -> str:
    return datetime.now(UTC).strftime("%H:%M:%S UTC")


class EmbeddedDatabaseWatch:
    """Restarts the embedded server when its postmaster is gone. `check` returns False once
    it gave up (the server died, or would not start, too often in a row)."""

    def __init__(self, server: EmbeddedPostgres, policy: RestartPolicy):
        self.server = server
        self.policy = policy
        self.pid = server.running_pid()
        self.started_at = time.monotonic()
        self.down_at: float | None = None
        self.restart_at: float | None = None

    def check(self, now: float) -> bool:
        if self.restart_at is not None:
            return now < self.restart_at or self._restart(now)
        if self.server.running_pid() is not None:
            return True
        self.down_at = now
        # A clean shutdown removes postmaster.pid; a SIGKILL or a crash leaves it behind.
        left = (self.server.pgdata / "postmaster.pid").exists()
        cause = "was killed or crashed" if left else "was shut down"
        return self._schedule(
            now,
            f"PostgreSQL (pid {self.pid}) {cause} ({_clock()}; its log:"
            f" {self.server.pgdata / 'log'})",
        )

    def _schedule(self, now: float, what: str) -> bool:
        delay = self.policy.after_exit(now - self.started_at)
        if delay is None:
            logger.error(
                "%s; it failed %d times in a row, each within %.0fs of its start: giving up and"
                " stopping AgentSys.",
                what,
                self.policy.fast_crashes,
                self.policy.fast_seconds,
            )
            return False
        logger.warning("%s; restarting it in %.1fs", what, delay)
        self.restart_at = now + delay
        return True

    def _restart(self, now: float) -> bool:
        self.started_at = now
        try:
            self.server.start_server()
        except Exception as error:  # a start that fails is a crash like any other
            self.restart_at = None
            first = (str(error).strip().splitlines() or [type(error).__name__])[0]
            return self._schedule(now, f"PostgreSQL did not start ({first})")
        self.restart_at = None
        self.pid = self.server.running_pid()
        down_for = time.monotonic() - (self.down_at or now)
        logger.warning(
            "PostgreSQL is back (pid %s), %.1fs after it went away (%.1fs of it waiting for the"
            " dead postmaster to be reaped)",
            self.pid,
            down_for,
            getattr(self.server, "reaping_waited", 0.0),
        )
        return True


class ExternalDatabaseWatch:
    """Says when the external database stops answering and when it answers again. Asked on a
    thread of its own: a connect to an unreachable host takes up to CONNECT_TIMEOUT_SECONDS,
    which the supervising loop must not wait for."""

    def __init__(self, params: dict):
        # A server gone silent (a network cut) fails a ping after TCP_USER_TIMEOUT_MS instead
        # of TCP's retransmissions (minutes); a unix socket ignores it.
        self.params = {
            **params,
            "connect_timeout": CONNECT_TIMEOUT_SECONDS,
            "tcp_user_timeout": TCP_USER_TIMEOUT_MS,
        }
        self.down_since: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="database-watch", daemon=True)
        self._thread.start()

    def check(self, now: float) -> bool:
        return True  # never gives up: there is nothing here to restart

    def stop(self) -> None:
        self._stop.set()

    def _watch(self) -> None:
        # One connection, pinged, not a new one a probe: each would fork a server backend.
        conn = None
        while not self._stop.wait(PROBE_SECONDS):
            try:
                conn = conn or psycopg.connect(**self.params, autocommit=True)
                conn.execute("SELECT 1")
            except psycopg.Error as error:
                if conn is not None:
                    conn.close()
                conn = None
                self._went_down(error)
                continue
            if self.down_since is not None:
                logger.warning(
                    "The database (DATABASE_URL) is back after %.1fs",
                    time.monotonic() - self.down_since,
                )
                self.down_since = None

    def _went_down(self, error: psycopg.Error) -> None:
        if self.down_since is not None:
            return
        self.down_since = time.monotonic()
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        logger.warning(
            "The database (DATABASE_URL) is unreachable since %s (%s); waiting for it. Runs go"
            " on; pages and the API answer 503 until it is back.",
            _clock(),
            first,
        )


def watch_database(policy: RestartPolicy) -> EmbeddedDatabaseWatch | ExternalDatabaseWatch:
    """The watch for the database this process uses (settings decided which)."""
    from django.conf import settings
    from django.db import connection

    if settings.EMBEDDED_POSTGRES is not None:
        return EmbeddedDatabaseWatch(settings.EMBEDDED_POSTGRES, policy)
    params = connection.get_connection_params()
    for key in ("cursor_factory", "context"):  # Django's own, not libpq's
        params.pop(key, None)
    return ExternalDatabaseWatch(params)
