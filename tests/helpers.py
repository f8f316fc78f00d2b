"""Helpers for tests that start real processes."""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def database_url_of_current_connection() -> str:
    """A DATABASE_URL for child processes that points at the database this test uses."""
    from django.db import connection  # here: the unit tests import this module without Django

    params = connection.settings_dict
    host = params["HOST"] or params.get("OPTIONS", {}).get("host", "")
    if host.startswith("/"):
        return f"postgresql://{params['USER']}@/{params['NAME']}?host={host}"
    password = f":{params['PASSWORD']}" if params["PASSWORD"] else ""
    port = f":{params['PORT']}" if params["PORT"] else ""
    return f"postgresql://{params['USER']}{password}@{host}{port}/{params['NAME']}"


def child_env(**overrides: str | None) -> dict[str, str]:
    """The test process's environment with overrides; a None value removes the variable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)  # set around Playwright, for the test itself
    for key, value in overrides.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def child_pytest(*args: str, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    """A pytest of its own (a fresh test database, `--create-db`) over `args`, in `env`: for
    tests whose suite must run on another database server than the workers share."""
    return subprocess.run(
        [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--create-db", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def manage(*args: str, env: dict[str, str], **kwargs) -> subprocess.Popen:
    return subprocess.Popen([PYTHON, "manage.py", *args], cwd=REPO, env=env, **kwargs)


def wait_until(predicate, timeout: float, interval: float = 0.05, message: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {message}")


def pid_alive(pid: int) -> bool:
    """True if `pid` exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def describe_process(pid: int) -> str:
    """State, parent and what each thread waits in, for a failure message about `pid`."""
    proc = Path(f"/proc/{pid}")
    try:
        status = dict(line.split(":\t", 1) for line in (proc / "status").read_text().splitlines())
    except OSError:
        return f"pid {pid}: gone"
    threads = []
    for task in sorted((proc / "task").iterdir()):
        try:
            wchan = (task / "wchan").read_text() or "-"
            name = (task / "comm").read_text().strip()
        except OSError:
            continue
        threads.append(f"{task.name}:{name}@{wchan}")
    return (
        f"pid {pid} state={status.get('State')} ppid={status.get('PPid')} "
        f"threads=[{', '.join(threads)}]"
    )


def launch_run(tmp_path, command, gpu_required=0, **extra):
    """A run of `command` in tmp_path, queued at once (a runagentd must be up to start it)."""
    from scheduler_app.runs import launch as runs

    return runs.create_run(
        name="run",
        command=command,
        workdir=str(tmp_path),
        gpu_required=gpu_required,
        auto_start=True,
        **extra,
    )


def run_ended(run, timeout=30):
    """The run, re-read once it has ended (in any end state)."""
    from scheduler_app.models import Run, RunStatus

    live = set(RunStatus.open())
    wait_until(
        lambda: Run.objects.get(pk=run.pk).status not in live, timeout, message=f"{run.id} to end"
    )
    return Run.objects.get(pk=run.pk)


def migrate(targets=None):
    """Migrate the test database to `targets` (default: every app's latest migration); the
    project state's apps at those targets. A test that moves the schema back must end with
    migrate(): the tests after it share the database."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    targets = targets or executor.loader.graph.leaf_nodes()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def models_at(targets):
    """Migrate the test database back to `targets` and return a getter of that state's models
    ("app_label.Model"), to write the rows an older deployment held (a migrate-from test, which
    uses the `latest_schema_after` fixture to leave every migration applied)."""
    from django.contrib.contenttypes.models import ContentType

    old = migrate(targets)
    ContentType.objects.clear_cache()
    return lambda label: old.get_model(*label.split("."))


def git(*args: str, cwd) -> str:
    """git as a test's person runs it, with an identity of their own; its stdout. A git
    that fails fails the test, saying what it said."""
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout


@contextlib.contextmanager
def file_lock(path: Path):
    """An exclusive flock on `path` (made if missing), for work the xdist workers of one
    session must do once between them (tests/template_db.py, tests/embedded_homes.py)."""
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
