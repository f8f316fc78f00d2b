"""First-start chores shared by `manage.py serve` and the tests: the admin account, its
first API token and the demo workspace."""

from __future__ import annotations

import json
import secrets
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model

from accounts_app.services import create_token

DEMO_SOURCE = Path(__file__).parent / "demo_workspace"


@dataclass(frozen=True)
class AdminLogin:
    username: str
    password: str | None  # set only when it was just created and must be shown once
    created: bool


def ensure_admin_user() -> AdminLogin:
    """Create the admin account on a fresh database; never touch an existing one."""
    config = settings.AGENTSYS
    users = get_user_model()
    existing = users.objects.filter(username=config.admin_username).first()
    if existing is not None:
        return AdminLogin(existing.get_username(), None, created=False)
    if users.objects.filter(is_superuser=True).exists():
        admin = users.objects.filter(is_superuser=True).order_by("pk").first()
        return AdminLogin(admin.get_username(), None, created=False)
    password = config.admin_password or secrets.token_urlsafe(12)
    users.objects.create_superuser(
        username=config.admin_username, email=config.admin_email, password=password
    )
    shown = None if config.admin_password else password
    return AdminLogin(config.admin_username, shown, created=True)


FIRST_TOKEN_NAME = "created on first start"  # noqa: S105 (a name)
DEMO_RUN = {
    "name": "demo: train.py",
    "command": "python3 train.py --lr=0.05 --steps=200 --sleep=0.02",
    "auto_start": True,
}


def ensure_admin_token(login: AdminLogin) -> str | None:
    """With the admin account just created, create its first API token and return it (to be
    shown once, like the password). Any other start: None."""
    if not login.created:
        return None
    admin = get_user_model().objects.get(username=login.username)
    _, token = create_token(user=admin, name=FIRST_TOKEN_NAME)
    return token


def demo_run_curl(base_url: str, token: str) -> str:
    """One shell line that starts the demo workspace's training run through the API."""
    body = json.dumps(DEMO_RUN, separators=(",", ":"))
    url = base_url.rstrip("/") + "/api/runs"
    return (
        f"curl -H {shlex.quote('X-Auth-Token: ' + token)} "
        f"-H 'Content-Type: application/json' -d {shlex.quote(body)} {url}"
    )


def ensure_workspace(path: Path) -> bool:
    """Create the demo workspace (a git repo with train.py) if `path` does not exist.
    Returns True when it was created."""
    if path.exists():
        return False
    shutil.copytree(DEMO_SOURCE, path)
    git = shutil.which("git")
    if git:
        env = {
            "GIT_AUTHOR_NAME": "AgentSys",
            "GIT_AUTHOR_EMAIL": "agentsys@localhost",
            "GIT_COMMITTER_NAME": "AgentSys",
            "GIT_COMMITTER_EMAIL": "agentsys@localhost",
            "PATH": "/usr/bin:/bin",
        }
        for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "Demo workspace"]):
            subprocess.run([git, *args], cwd=path, env=env, check=True, capture_output=True)
    return True
