"""First-start chores shared by `manage.py serve` and the tests: the admin account and the
demo workspace."""

from __future__ import annotations

import secrets
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model

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
