"""A throw-away AgentSys for benchmarks: embedded PostgreSQL in a temp AGENTSYS_HOME,
migrated, with a runagentd (and optionally daphne) running against it."""

from __future__ import annotations

import atexit
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
AGENT_CLASSES = "bench.agents.Quick,bench.agents.Emitter"
TOKEN = secrets.token_hex(16)  # a fresh API token for each benchmark run


class BenchSystem:
    def __init__(self, *, port: int | None = None, gpus: str = ""):
        self.tmp = tempfile.TemporaryDirectory(prefix="agentsys-bench-")
        self.port = port
        self.env = {
            **{k: v for k, v in os.environ.items() if k != "DATABASE_URL"},
            "AGENTSYS_HOME": str(Path(self.tmp.name) / "home"),
            # Where runs run: made here, as `make run` makes its demo workspace (a workdir that
            # is not on the host, with no commit to check out, fails the run).
            "AGENTSYS_WORKDIR": str(Path(self.tmp.name) / "workdir"),
            "AGENTSYS_AGENT_CLASSES": AGENT_CLASSES,
            "RESEARCH_AGENT_USER_AUTH_TOKEN": TOKEN,
            "AGENTSYS_HOST_NAME": "bench-host",
            "LOG_LEVEL": "WARNING",
            "AGENTSYS_GPUS": gpus,
        }
        Path(self.env["AGENTSYS_WORKDIR"]).mkdir()
        os.environ.update(self.env)
        os.environ.pop("DATABASE_URL", None)
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "researchagent.settings")
        sys.path.insert(0, str(REPO))
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        self.processes: list[subprocess.Popen] = []
        # Registered after settings took the database lease, so it runs first at exit: the
        # lease is dropped (stopping PostgreSQL) while the data dir still exists, then the
        # temp dir goes. The other way round the server outlived its deleted data dir.
        atexit.register(self._release_database)

    def _release_database(self) -> None:
        from django.conf import settings
        from django.db import connections

        connections.close_all()
        embedded = getattr(settings, "EMBEDDED_POSTGRES", None)
        if embedded is not None:
            # runagentd's forkserver leaves a moment after runagentd: wait for its lease, so
            # this release is the last one and stops the server.
            deadline = time.monotonic() + 15
            while embedded.live_leases() != [os.getpid()] and time.monotonic() < deadline:
                time.sleep(0.1)
            embedded.release()
        self.tmp.cleanup()

    def start_daemon(self, host_name: str = "bench-host", **env: str) -> subprocess.Popen:
        """runagentd, registered as `host_name`: another than the web's (bench-host) is a
        GPU host whose disk the web does not share (it serves run logs from the database).
        `env`: more of its environment."""
        from hosts_app.models import Host

        argv = [sys.executable, "manage.py", "runagentd"]
        process = self._spawn(argv, AGENTSYS_HOST_NAME=host_name, **env)
        self.processes.append(process)
        self._wait(lambda: Host.objects.filter(name=host_name, status="online").exists())
        return process

    def stop_process(self, process: subprocess.Popen) -> None:
        """One of them ended (SIGTERM, then SIGKILL after 15 s), before the others."""
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
        self.processes.remove(process)

    def collect_static(self) -> None:
        """The static files the web serves (its manifest), collected as `make run` does."""
        argv = [sys.executable, "manage.py", "collectstatic", "--noinput", "--verbosity", "0"]
        subprocess.run(argv, cwd=REPO, env=self.env, check=True)

    def start_web(self) -> None:
        """The web as `make run` starts it: AGENTSYS_WEB_PROCESSES processes on the port."""
        import socket

        from django.conf import settings

        argv = [sys.executable, "-m", "researchagent.webserver", "-p", str(self.port)]
        argv += ["--processes", str(settings.AGENTSYS.web_processes)]
        self.processes.append(self._spawn(argv))

        def listening():
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return True
            except OSError:
                return False

        self._wait(listening)

    def _spawn(self, argv, **env):
        return subprocess.Popen(
            argv,
            cwd=REPO,
            env={**self.env, **env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    @staticmethod
    def _wait(predicate, timeout=60.0):
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise RuntimeError("bench system did not come up")
            time.sleep(0.05)

    def close(self) -> None:
        from django.db import connections

        for process in reversed(self.processes):
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
        connections.close_all()
