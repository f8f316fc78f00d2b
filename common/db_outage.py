"""What a database outage looks like to Django code, and waiting one out.

PostgreSQL restarting, or down for a while, shows up as OperationalError ("terminating
connection due to administrator command", "connection refused", "the database system is
shutting down") or InterfaceError ("connection already closed"), from the ORM (Django's
classes) or from psycopg used directly (the channel layer). A web request gets a fresh
connection each time; long-lived processes (runagentd, its workers) do not: Django closes a
broken connection only around requests, so outside them it stays broken until it is closed
by hand. `drop_connection` does that, and `wait_for_database` retries a call until the
database answers again.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime

import psycopg
from django.db import InterfaceError, OperationalError, connection

logger = logging.getLogger(__name__)

DATABASE_ERRORS = (
    OperationalError,
    InterfaceError,
    psycopg.OperationalError,
    psycopg.InterfaceError,
)
FIRST_RETRY_SECONDS = 0.1
MAX_RETRY_SECONDS = 1.0  # the database is back within about this long of its return
_stop_waiting = threading.Event()


def is_database_unavailable(error: BaseException | None) -> bool:
    """Whether `error`, or an error it was raised from, says the database cannot answer."""
    seen = 0
    while error is not None and seen < 10:  # a cause chain is short; never loop on a cycle
        if isinstance(error, DATABASE_ERRORS):
            return True
        error = error.__cause__ or error.__context__
        seen += 1
    return False


def drop_connection() -> None:
    """Close this thread's connection after a failure, so the next query connects afresh
    (inside a transaction it belongs to the caller, who sees the error and rolls back)."""
    if not connection.in_atomic_block:
        connection.close()


def retry_delays():
    """0.1, 0.2, 0.4, 0.8, 1, 1, ... seconds."""
    delay = FIRST_RETRY_SECONDS
    while True:
        yield delay
        delay = min(delay * 2, MAX_RETRY_SECONDS)


def stop_waiting() -> None:
    """The process is ending: calls waiting in wait_for_database raise instead (a thread
    still waiting would keep the process from exiting)."""
    _stop_waiting.set()


def wait_for_database(fn, /, *args, **kwargs):
    """Call `fn` until the database answers it: while it cannot (an outage, a restart), the
    broken connection is dropped and the call tried again with backoff. Errors that are not
    about reaching the database are raised at once, and so is the outage once the process
    has called stop_waiting."""
    return _waited(logger.warning, fn, args, kwargs)


def wait_for_database_saying(say, fn, /, *args, **kwargs):
    """wait_for_database for a command on a console (`make demo`, `make chat`): `say` gets
    one line when the database goes away and one when it is back, not a traceback."""
    return _waited(lambda message, *values: say(message % values), fn, args, kwargs)


def _waited(tell, fn, args, kwargs):
    delays = retry_delays()
    down_since = None
    while True:
        try:
            result = fn(*args, **kwargs)
        except DATABASE_ERRORS as error:
            drop_connection()
            if _stop_waiting.is_set():
                raise
            if down_since is None:
                down_since = time.monotonic()
                tell("database unavailable (%s); waiting for it", first_line(error))
            _stop_waiting.wait(next(delays))
            continue
        if down_since is not None:
            tell("database back after %.1fs", time.monotonic() - down_since)
        return result


def first_line(error: BaseException) -> str:
    """The gist of a database error (psycopg's carry hints on further lines)."""
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


class Outage:
    """This process's knowledge that the database is down: since when (wall clock, for people
    to read) and the error that said so. Set and cleared by the web's watch
    (common/db_watch.py); read by every request, so that none waits on a database that is
    known to be away."""

    def __init__(self):
        self._lock = threading.Lock()
        self.since: float | None = None
        self.error = ""

    def begin(self, error: BaseException) -> bool:
        """Mark the database down; True if it was up until now."""
        with self._lock:
            if self.since is not None:
                return False
            self.since, self.error = time.time(), first_line(error)
            return True

    def end(self) -> float | None:
        """Mark it back; how long it was away, or None if it was not."""
        with self._lock:
            since, self.since = self.since, None
        return None if since is None else time.time() - since

    def describe(self) -> str | None:
        """One line for a person, or None while the database answers."""
        since = self.since
        if since is None:
            return None
        at = datetime.fromtimestamp(since, UTC).strftime("%H:%M:%S UTC")
        return (
            f"The database is unreachable since {at} ({time.time() - since:.0f}s): pages and the"
            " API answer 503 until it is back; runs and agents go on."
        )


outage = Outage()
