"""AgentSys's own files in a person's repository (`.agents/`: run logs, a loop's files, its
token; the `opencode.json` it wrote) stay out of their `git status` through the repository's
own `.git/info/exclude`: never through their `.gitignore`, a file of theirs that they commit,
and never by committing them.

Each name is written once per repository, relative to its top (a workdir may be a folder
inside it), and asked for once per process: a run start costs no git call after the first.
"""

from __future__ import annotations

import logging
import os
import subprocess
from pathlib import Path

logger = logging.getLogger(__name__)

GIT_TIMEOUT = 10.0
_done: set[tuple[str, str]] = set()


def keep_out_of_git(workdir: str | os.PathLike, name: str) -> bool:
    """Make `name` (a file, or a folder ending in "/", inside `workdir`) one that git does
    not see in `workdir`'s repository. False when `workdir` is in none (or git fails)."""
    key = (str(workdir), name)
    if key in _done:
        return True
    found = _repository_of(Path(workdir))
    if found is None:
        return False
    top, exclude = found
    try:
        inside = Path(workdir).resolve().relative_to(top)
    except ValueError:
        return False
    pattern = "/" + (inside / name).as_posix().removeprefix("./").lstrip("/")
    if name.endswith("/") and not pattern.endswith("/"):
        pattern += "/"
    try:
        text = exclude.read_text() if exclude.exists() else ""
        if pattern not in text.splitlines():
            exclude.parent.mkdir(parents=True, exist_ok=True)
            with exclude.open("a") as out:
                out.write(("\n" if text and not text.endswith("\n") else "") + pattern + "\n")
    except OSError as error:
        logger.warning("could not keep %s out of git in %s: %s", name, workdir, error)
        return False
    _done.add(key)
    return True


def tracked(workdir: str | os.PathLike, name: str) -> bool:
    """Whether the person's repository tracks `name` (then it is theirs to commit)."""
    try:
        result = subprocess.run(
            ["git", "-C", str(workdir), "ls-files", "--error-unmatch", "--", name],
            capture_output=True,
            timeout=GIT_TIMEOUT,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return result.returncode == 0


def _repository_of(workdir: Path) -> tuple[Path, Path] | None:
    """(its top, its info/exclude file), or None outside a repository."""
    try:
        result = subprocess.run(
            [
                "git",
                "-C",
                str(workdir),
                "rev-parse",
                "--show-toplevel",
                "--git-path",
                "info/exclude",
            ],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = result.stdout.splitlines()
    if result.returncode != 0 or len(lines) != 2:
        return None
    top = Path(lines[0]).resolve()
    exclude = Path(lines[1])
    return top, exclude if exclude.is_absolute() else (workdir / exclude)
