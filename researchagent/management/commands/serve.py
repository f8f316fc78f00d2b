"""`manage.py serve` (what `make run` runs): set up, then run daphne and runagentd together in
the foreground until Ctrl-C or SIGTERM, and leave no process behind.

This process holds a lease on the embedded PostgreSQL for its whole life (settings took it), so
the database outlives the children and stops after them, when the last lease is released.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import time

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from researchagent.bootstrap import ensure_admin_user, ensure_workspace

STOP_GRACE_SECONDS = 10
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Runs in each child before exec: if `serve` is killed outright, the child gets SIGTERM."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class Command(BaseCommand):
    help = "Migrate, collect static files, then run the web server and runagentd together."

    def add_arguments(self, parser):
        parser.add_argument("--no-daemon", action="store_true", help="Run the web server only")

    def handle(self, *args, **options):
        config = settings.AGENTSYS
        self._children: dict[str, subprocess.Popen] = {}
        self._stop_signal: int | None = None
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

        self._say(f"Database: {self._database_description()}")
        call_command("migrate", interactive=False, verbosity=0)
        call_command("collectstatic", interactive=False, verbosity=0)
        if ensure_workspace(settings.AGENTSYS_WORKDIR):
            self._say(f"Created the demo workspace in {settings.AGENTSYS_WORKDIR}")
        login = ensure_admin_user()

        self._start(
            "web",
            [
                sys.executable,
                "-m",
                "daphne",
                "-b",
                config.host,
                "-p",
                str(config.port),
                "researchagent.asgi:application",
            ],
        )
        if not options["no_daemon"]:
            self._start("runagentd", [sys.executable, "manage.py", "runagentd"])
        try:
            self._wait_for_port(config.host, config.port)
            self._announce(login)
            exit_code = self._supervise()
        finally:
            self._stop_children()
        if exit_code:
            raise CommandError(f"stopped because a process exited with code {exit_code}")

    # -- helpers ---------------------------------------------------------------------------

    def _say(self, line: str) -> None:
        self.stdout.write(line)
        self.stdout.flush()

    def _database_description(self) -> str:
        if settings.EMBEDDED_POSTGRES is None:
            return "external PostgreSQL (DATABASE_URL)"
        return f"embedded PostgreSQL in {settings.EMBEDDED_POSTGRES.pgdata}"

    def _on_signal(self, signum, frame) -> None:
        self._stop_signal = signum

    def _start(self, name: str, argv: list[str]) -> None:
        # Own session: a terminal's Ctrl-C reaches only us, and we stop the children in order.
        self._children[name] = subprocess.Popen(
            argv, cwd=settings.BASE_DIR, start_new_session=True, preexec_fn=_die_with_parent
        )

    def _wait_for_port(self, host: str, port: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self._stop_signal is None:
            if self._children["web"].poll() is not None:
                raise CommandError(f"the web server exited ({self._children['web'].returncode})")
            try:
                with socket.create_connection((host, port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.1)
        if self._stop_signal is None:
            raise CommandError(f"the web server did not listen on {host}:{port} in {timeout}s")

    def _announce(self, login) -> None:
        config = settings.AGENTSYS
        url = f"http://{config.host}:{config.port}/"
        self._say("")
        self._say(f"AgentSys is running at {url}")
        if login.password:
            self._say(f"Log in as '{login.username}' with the one-time password: {login.password}")
            self._say(
                "  (shown only this once; change it with "
                f".venv/bin/python manage.py changepassword {login.username})"
            )
        elif login.created:
            self._say(f"Log in as '{login.username}' with AGENTSYS_ADMIN_PASSWORD.")
        else:
            self._say(
                f"Log in as '{login.username}' (forgot the password? "
                f".venv/bin/python manage.py changepassword {login.username})"
            )
        self._say(f"Workdir: {settings.AGENTSYS_WORKDIR}   Ctrl-C stops everything.")
        self._say("")

    def _supervise(self) -> int:
        """Wait for a stop signal, or for a child to exit on its own (then stop the rest)."""
        while self._stop_signal is None:
            for name, child in self._children.items():
                if child.poll() is not None:
                    self.stderr.write(f"{name} exited with code {child.returncode}; stopping.")
                    return child.returncode or 1
            time.sleep(0.2)
        return 0

    def _stop_children(self) -> None:
        # The daemon first (it may still write to the database), then the web server.
        for name in ("runagentd", "web"):
            child = self._children.get(name)
            if child is None or child.poll() is not None:
                continue
            child.send_signal(signal.SIGTERM)
            try:
                child.wait(STOP_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                self.stderr.write(f"{name} ignored SIGTERM for {STOP_GRACE_SECONDS}s; killing it")
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
        self._say("Stopped.")
