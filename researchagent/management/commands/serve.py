"""`manage.py serve` (what `make run` runs): set up, then run daphne and runagentd together in
the foreground until Ctrl-C or SIGTERM, restarting either one that exits on its own.

Each child leads its own session; stopping one waits for its whole session (its workers
included) to end, not just for the leader. Runs are not part of it: they live in sessions of
their own, outlive `serve`, and the next start follows them again.

This process holds a lease on the embedded PostgreSQL for its whole life (settings took it), so
the database outlives the children and stops after them, when the last lease is released.
"""

from __future__ import annotations

import logging
import os
import secrets
import shlex
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from agentsys import process_session
from agentsys.proctree import process_info
from mcp_app.serve_wiring import START_WAIT_SECONDS, TRY_SECONDS, status_lines, wire_workdir
from researchagent.bootstrap import (
    demo_run_curl,
    ensure_admin_token,
    ensure_admin_user,
    ensure_workspace,
)
from researchagent.child_process import die_with_parent
from researchagent.db_supervision import watch_database
from researchagent.restart_policy import RestartPolicy, exit_cause
from researchagent.static_collect import collect_static

# The web stops within 3 s, runagentd within 1 s (tests/e2e/test_web_stop.py).
STOP_GRACE_SECONDS = 5
KILL_WAIT_SECONDS = 2
logger = logging.getLogger("agentsys.serve")


def _waited(process: subprocess.Popen, deadline: float) -> bool:
    """Whether `process` exited by `deadline` (it is reaped if so)."""
    try:
        process.wait(max(0.0, deadline - time.monotonic()))
        return True
    except subprocess.TimeoutExpired:
        return False


@dataclass
class Child:
    name: str
    argv: list[str]
    policy: RestartPolicy
    process: subprocess.Popen | None = None
    started_at: float = 0.0
    restart_at: float | None = None  # set while it waits out its backoff
    # Every session it ever led: (its id, when its leader started). Only the start tells a
    # session that ended long ago from a new one that was given its id since.
    sessions: list[tuple[int, int]] = field(default_factory=list)
    env: dict[str, str] | None = None
    cwd: str | None = None


class Command(BaseCommand):
    help = "Migrate, collect static files, then run the web server and runagentd together."

    def add_arguments(self, parser):
        parser.add_argument("--no-daemon", action="store_true", help="Run the web server only")
        parser.add_argument(
            "--daemon-args", default="", help="Extra options for runagentd, as one string"
        )
        parser.add_argument(
            "--max-crashes",
            type=int,
            default=5,
            help="Give up after a child crashed this many times in a row, each within "
            "--fast-crash-seconds of its start",
        )
        parser.add_argument("--fast-crash-seconds", type=float, default=30.0)

    def handle(self, *args, **options):
        self._stop_signal: int | None = None
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

        self._say(f"Database: {self._database_description()}")
        call_command("migrate", interactive=False, verbosity=0)
        collect_static()  # unless the last collect is still current
        if ensure_workspace(settings.AGENTSYS_WORKDIR):
            self._say(f"Created the demo workspace in {settings.AGENTSYS_WORKDIR}")
        # Before OpenCode starts: it reads the workdir's opencode.json once, on first use.
        self._say(wire_workdir(settings.AGENTSYS_WORKDIR.resolve()))
        login = ensure_admin_user()
        token = ensure_admin_token(login)

        self._children = self._plan(options)
        self._database = watch_database(self._policy(options))
        for child in self._children.values():
            self._spawn(child)
        try:
            self._wait_for_port(settings.AGENTSYS.host, settings.AGENTSYS.port)
            self._wait_for_opencode()
            self._report_mcp()
            self._announce(login, token)
            exit_code = self._supervise()
        finally:
            self._stop_children()
        if exit_code:
            raise CommandError(f"stopped because a process kept crashing ({exit_code})")

    @staticmethod
    def _policy(options) -> RestartPolicy:
        return RestartPolicy(
            max_fast_crashes=options["max_crashes"], fast_seconds=options["fast_crash_seconds"]
        )

    def _plan(self, options) -> dict[str, Child]:
        def policy():
            return self._policy(options)

        config = settings.AGENTSYS
        children, shared_env = self._plan_model(policy)
        web = [sys.executable, "-m", "researchagent.webserver", "-b", config.host]
        web += ["-p", str(config.port), "--processes", str(config.web_processes)]
        if config.access_log:  # a line per request: only when asked for
            web += ["--access-log", "-"]
        children["web"] = Child("web", web, policy(), env=shared_env)
        if not options["no_daemon"]:
            daemon = [
                sys.executable,
                "manage.py",
                "runagentd",
                *shlex.split(options["daemon_args"]),
            ]
            children["runagentd"] = Child("runagentd", daemon, policy(), env=shared_env)
        return children

    def _plan_model(self, policy) -> tuple[dict[str, Child], dict[str, str]]:
        """The model side: with OPENCODE_URL set, that server (nothing is started); otherwise a
        local OpenCode, and with MODEL_PROVIDER=demo the project's scripted model behind it.
        Ports are chosen once, so a restarted child keeps its address."""
        from agentsys.opencode.server import LocalOpenCode, free_port, provider_config

        config = settings.AGENTSYS
        password = config.opencode_password or secrets.token_urlsafe(24)
        env = {
            **os.environ,
            "OPENCODE_SERVER_USERNAME": config.opencode_username,
            "OPENCODE_SERVER_PASSWORD": password,
            "MODEL_PROVIDER": config.model_provider,
            "MODEL_ID": config.model_id,
        }
        self._opencode = None
        if config.opencode_url:
            env["OPENCODE_URL"] = config.opencode_url
            self._say(f"OpenCode: {config.opencode_url} (OPENCODE_URL; not started here)")
            return {}, env
        children: dict[str, Child] = {}
        base_url = config.model_base_url or None
        if config.model_provider == "demo":
            port = free_port()
            model = [sys.executable, "-m", "agentsys.scripted_llm", "--demo", "--port", str(port)]
            model += ["--seconds", str(config.demo_seconds)]  # slow enough to watch and steer
            children["model"] = Child("model", model, policy())
            base_url = f"http://127.0.0.1:{port}/v1"
        opencode = LocalOpenCode(
            state_dir=config.home / "opencode",
            workdir=settings.AGENTSYS_WORKDIR,
            config=provider_config(
                provider=config.model_provider, model=config.model_id, demo_base_url=base_url
            ),
            password=password,
            project_config=True,  # the workdir's opencode.json: its MCP servers
        )
        self._opencode = opencode
        children["opencode"] = Child(
            "opencode",
            opencode.command(),
            policy(),
            env=opencode.environment(),
            cwd=str(settings.AGENTSYS_WORKDIR),
        )
        env["OPENCODE_URL"] = opencode.url
        model = "the demo model" if config.model_provider == "demo" else config.model_provider
        self._say(f"OpenCode: {opencode.url} (started here, state in {opencode.state_dir})")
        self._say(f"Model: {config.model_provider}/{config.model_id} ({model})")
        return children, env

    def _wait_for_opencode(self, timeout: float = 60) -> None:
        """Until OpenCode answers, in short waits, so that Ctrl-C meanwhile stops at once."""
        if self._opencode is None:
            return
        deadline = time.monotonic() + timeout
        while self._stop_signal is None:
            try:
                self._opencode.wait_healthy(min(1.0, max(0.1, deadline - time.monotonic())))
                return
            except Exception as error:  # the web and the daemon still work; agents say why
                if time.monotonic() >= deadline:
                    self.stderr.write(f"OpenCode is not answering: {error}")
                    return

    def _report_mcp(self) -> None:
        """OpenCode's status of each MCP server of the workdir, a failed one with its fix.
        Asking also starts them, so the first agent does not wait for that."""
        config = settings.AGENTSYS
        local = self._opencode
        url = local.url if local else config.opencode_url
        lines, trouble = status_lines(
            url,
            settings.AGENTSYS_WORKDIR,
            username=config.opencode_username,
            password=local.password if local else config.opencode_password,
            wait=START_WAIT_SECONDS if local else TRY_SECONDS,
            stopping=lambda: self._stop_signal is not None,
        )
        for line in lines:
            self._say(line)
        for line in trouble:
            self.stderr.write(line)

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

    def _spawn(self, child: Child) -> None:
        # Own session: a terminal's Ctrl-C reaches only us, and we stop the children in order.
        child.process = subprocess.Popen(
            child.argv,
            cwd=child.cwd or settings.BASE_DIR,
            env=child.env,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
        child.started_at, child.restart_at = time.monotonic(), None
        leader = process_info(child.process.pid)
        child.sessions.append((child.process.pid, leader.start_time if leader else 0))

    def _wait_for_port(self, host: str, port: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        web = self._children["web"].process
        while time.monotonic() < deadline and self._stop_signal is None:
            if web.poll() is not None:
                raise CommandError(f"the web server exited ({exit_cause(web.returncode)})")
            try:
                with socket.create_connection((host, port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.1)
        if self._stop_signal is None:
            raise CommandError(f"the web server did not listen on {host}:{port} in {timeout}s")

    def _announce(self, login, token) -> None:
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
        if token:
            self._say(f"API token for '{login.username}' (shown only this once): {token}")
            self._say("  Start the demo run with:")
            self._say(f"  {demo_run_curl(url, token)}")
        self._say("Chat with the session agent (in a second terminal): make chat")
        self._say(f"Workdir: {settings.AGENTSYS_WORKDIR}   Ctrl-C stops everything.")
        self._say("")

    def _supervise(self) -> int:
        """Until a stop signal: restart a child (or the embedded database) that exited, after
        its backoff. Returns 0, or 1 when one crashed too often in a row (the caller then stops
        the rest)."""
        while self._stop_signal is None:
            now = time.monotonic()
            if not self._database.check(now):  # the database kept dying: it said why
                return 1
            for child in self._children.values():
                if child.restart_at is not None:
                    if now >= child.restart_at:
                        self._spawn(child)
                        logger.warning("%s restarted (pid %d)", child.name, child.process.pid)
                    continue
                if child.process.poll() is None:
                    continue
                cause = exit_cause(child.process.returncode)
                ran_for = now - child.started_at
                delay = child.policy.after_exit(ran_for)
                if delay is None:
                    logger.error(
                        "%s crashed %d times in a row, each within %.0fs of its start (last: %s);"
                        " giving up and stopping AgentSys. Its output above says why.",
                        child.name,
                        child.policy.fast_crashes,
                        child.policy.fast_seconds,
                        cause,
                    )
                    return 1
                logger.warning(
                    "%s (pid %d) exited after %.1fs with %s; restarting it in %.1fs",
                    child.name,
                    child.process.pid,
                    ran_for,
                    cause,
                    delay,
                )
                child.restart_at = now + delay
            time.sleep(0.1)
        return 0

    def _stop_children(self) -> None:
        # The daemon and the web first (the daemon may still write to the database and talk
        # to OpenCode), then the model side; each group stops together, within one grace.
        children = getattr(self, "_children", {})
        if settings.EMBEDDED_POSTGRES is not None:  # ours to stop last: have it ready
            settings.EMBEDDED_POSTGRES.checkpoint_in_background()
        for group in (("runagentd", "web"), ("opencode", "model")):
            self._stop_together([children[name] for name in group if name in children])
        self._report_live_runs()
        self._say("Stopped.")

    def _stop_together(self, children: list[Child]) -> None:
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        for child in children:
            if child.process is not None and child.process.poll() is None:
                child.process.send_signal(signal.SIGTERM)
        for child in children:
            self._stop(child, deadline)

    def _stop(self, child: Child, deadline: float | None = None) -> None:
        """After SIGTERM to the leader: wait until `deadline` for its whole session (every
        session it ever led) to end, then SIGKILL every process still in it, the leader
        included. Every wait is bounded: a process that survives SIGKILL (stuck in the kernel)
        is reported and left, never waited for."""
        if deadline is None:  # stopping one child alone
            deadline = time.monotonic() + STOP_GRACE_SECONDS
            if child.process is not None and child.process.poll() is None:
                child.process.send_signal(signal.SIGTERM)
        process = child.process
        if process is not None and not _waited(process, deadline):
            self.stderr.write(
                f"{child.name} did not stop within {STOP_GRACE_SECONDS:g}s of SIGTERM; killing it"
            )
        for sid, started in child.sessions:
            remaining = max(0.0, deadline - time.monotonic())
            if process_session.wait_session_empty(sid, started, remaining):
                continue
            left = process_session.kill_session(sid, started)
            self.stderr.write(f"{child.name}: killed {len(left)} process(es) left behind")
            if not process_session.wait_session_empty(sid, started, KILL_WAIT_SECONDS):
                self.stderr.write(f"{child.name}: pids {left} survived SIGKILL; leaving them")
        if process is not None:
            _waited(process, time.monotonic() + KILL_WAIT_SECONDS)  # reap the leader

    def _report_live_runs(self) -> None:
        from django.db import connection

        from runtime_app.run_processes import live_runs

        # Serve's own connection was opened at the start and idle since: the server may have
        # been restarted meanwhile (researchagent/db_supervision.py), which broke it. A fresh one.
        connection.close()
        try:
            count = len(live_runs())
        except Exception as exc:  # the database may be what went away; say so and go on
            self.stderr.write(f"Could not check for runs still running: {exc}")
            return
        if count:
            noun = "run is" if count == 1 else "runs are"
            self._say(
                f"{count} {noun} still running; they will be followed again on the next start;"
                " `manage.py runs stop --all` ends them"
            )
