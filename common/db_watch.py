"""The web process's watch on the database (issue 34): one connection of its own, held idle,
that learns within a tick when the server goes away, and then asks every PROBE_SECONDS
whether it is back.

Without it a request found out by itself, and slowly: the pool hands out its connections,
each fails, and the next request waits for a new one the pool's full `timeout` (30 s) before
its 503. While `outage` says the database is down, the middleware answers at once instead
(common/db_unavailable.py), and the pool is closed, which fails the requests already waiting
on it; the next request after the return opens a new one, so nothing waits out the pool's
reconnect backoff either.
"""

from __future__ import annotations

import contextlib
import logging
import select
import threading

import psycopg

from common.db_outage import DATABASE_ERRORS, outage

logger = logging.getLogger(__name__)
IDLE_CHECK_SECONDS = 1.0  # a server gone without closing the socket (a network cut) is pinged
PROBE_SECONDS = 0.2  # while it is down: how often to ask
CONNECT_TIMEOUT_SECONDS = 2  # libpq's least
TCP_USER_TIMEOUT_MS = 3000
# "too many clients" and its kin: the server answered, so it is not away; the requests get
# their connections from the pool, opened earlier. A refused connect may carry no SQLSTATE
# (53: insufficient resources), only the server's words.
SERVER_ANSWERED_CLASS = "53"
SERVER_ANSWERED_WORDS = ("too many clients", "connection slots are reserved")
_started = threading.Lock()
_thread: threading.Thread | None = None


def _connect() -> psycopg.Connection:
    from django.db import connections

    params = connections["default"].get_connection_params()
    for key in ("cursor_factory", "context"):  # Django's own, not libpq's
        params.pop(key, None)
    params["connect_timeout"] = CONNECT_TIMEOUT_SECONDS
    # A server gone silent (a network cut) fails the ping after this, not after TCP's
    # retransmissions (minutes); a unix socket ignores it.
    params["tcp_user_timeout"] = TCP_USER_TIMEOUT_MS
    return psycopg.connect(**params, autocommit=True)


def _close_the_pool() -> None:
    """Fail the requests waiting for a pooled connection now rather than after the pool's
    timeout. Not through `close_pool()`: its `self.pool` would make a pool to close."""
    from django.db import connections

    wrapper = connections["default"]
    pool = type(wrapper)._connection_pools.pop(wrapper.alias, None)
    if pool is not None:
        # close() fails the waiting requests first, then joins the pool's threads (one may
        # be in a connect): that part on a thread of its own, so the watch goes on.
        threading.Thread(target=_close, args=(pool,), name="pool-close", daemon=True).start()


def _close(pool) -> None:
    with contextlib.suppress(Exception):  # a pool half gone already is as good as closed
        pool.close(timeout=5)


def _server_answered(error: BaseException) -> bool:
    if (getattr(error, "sqlstate", None) or "").startswith(SERVER_ANSWERED_CLASS):
        return True
    return any(words in str(error) for words in SERVER_ANSWERED_WORDS)


def _went_down(error: BaseException) -> None:
    if outage.begin(error):
        logger.warning("database unreachable (%s); answering 503 until it is back", outage.error)
        _close_the_pool()


def _came_back() -> None:
    down_for = outage.end()
    if down_for is not None:
        logger.warning("database back after %.1fs", down_for)


def watch(stop: threading.Event) -> None:
    """Until `stop`: keep `outage` true to the database's state."""
    conn = None
    while not stop.is_set():
        if conn is None:
            try:
                conn = _connect()
            except DATABASE_ERRORS as error:
                if _server_answered(error):
                    _came_back()
                else:
                    _went_down(error)
                stop.wait(PROBE_SECONDS)
                continue
            _came_back()
        try:
            # The server closing the socket (its backend ends with the postmaster) makes it
            # readable at once; the query then fails. Otherwise a ping every idle period.
            select.select([conn.fileno()], [], [], IDLE_CHECK_SECONDS)
            conn.execute("SELECT 1")
            if outage.since is not None:  # a request's confirm_down, since disproved
                _came_back()
        except (*DATABASE_ERRORS, OSError, ValueError) as error:
            with contextlib.suppress(Exception):
                conn.close()
            conn = None
            _went_down(error)


def confirm_down(error: BaseException) -> bool:
    """A request's own query failed with `error` before the watch noticed anything: if a
    new connection fails too, the database is away now (said at once, not a tick later,
    and not after the request's other checks waited on it). True when it is known away."""
    if outage.since is not None:
        return True
    try:
        _connect().close()
    except DATABASE_ERRORS as refused:
        if not _server_answered(refused):
            _went_down(refused)
    except Exception:  # a connection that cannot even be tried proves nothing here
        logger.debug("could not confirm the database outage (%s)", error, exc_info=True)
    return outage.since is not None


def start() -> None:
    """Start the watch once in this process (the web's ASGI application does)."""
    global _thread
    with _started:
        if _thread is None:
            _thread = threading.Thread(
                target=watch, args=(threading.Event(),), name="database-watch", daemon=True
            )
            _thread.start()
