"""What recording a run's code asks git, in as few calls as it can (issue 25: three git
processes a run were most of what POST /api/runs cost besides the database).

- Where a workdir sits in its repository (top, the workdir's path inside it, the index
  file) does not change while its `.git` stays the same entry, so it is asked once
  (`git rev-parse`) and kept, keyed by the workdir and the identity (device, inode) of the
  nearest `.git`: a repository made again, or moved, is asked again.
- Everything else comes from one `git status`: HEAD, whether a tracked file changed, and
  the untracked files. A clean work tree then needs no diff at all.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

STATUS_OPTIONS = (
    "status",
    "--porcelain=v2",
    "--branch",
    "-z",
    "--untracked-files=all",
    "--no-renames",
)


@dataclass(frozen=True)
class Place:
    top: str  # the work tree's top folder
    prefix: str  # the workdir inside it ("" at its top, else "a/b")
    index: str  # the index file's absolute path


@dataclass(frozen=True)
class Status:
    commit: str | None  # HEAD; None before the first commit
    changed: bool  # a tracked file differs from HEAD (staged or not)
    untracked: list[str]  # paths from the top, that .gitignore does not hide


def nearest_git_entry(workdir: Path) -> Path | None:
    """The `.git` (folder, or a worktree's file) in the workdir or the nearest above it."""
    path = workdir.absolute()
    for folder in (path, *path.parents):
        entry = folder / ".git"
        if entry.exists():
            return entry
    return None


class Places:
    """Place of each workdir, asked of git (`ask`) once per `.git` entry."""

    def __init__(self, ask: Callable[[Path], Place | None]):
        self._ask = ask
        self._lock = threading.Lock()
        self._known: dict[str, tuple[tuple[str, int, int], Place]] = {}

    def __call__(self, workdir: Path, entry: Path) -> Place | None:
        try:
            stat = entry.stat()
        except OSError:
            return None
        key, identity = str(workdir.absolute()), (str(entry), stat.st_dev, stat.st_ino)
        with self._lock:
            known = self._known.get(key)
        if known is not None and known[0] == identity:
            return known[1]
        place = self._ask(workdir)
        if place is not None:
            with self._lock:
                self._known[key] = (identity, place)
        return place


def parse_place(output: bytes) -> Place | None:
    """`git rev-parse --show-toplevel --show-prefix --path-format=absolute --git-path
    index`'s three lines."""
    lines = output.decode(errors="surrogateescape").split("\n")
    if len(lines) < 3 or not lines[0]:
        return None
    return Place(top=lines[0], prefix=lines[1].rstrip("/"), index=lines[2])


def parse_status(output: bytes) -> Status:
    """`git status` with STATUS_OPTIONS: NUL-separated entries, "# branch.oid X" among
    the headers, "? path" an untracked file, "1 ..." / "2 ..." / "u ..." a changed one."""
    commit, changed, untracked = None, False, []
    for entry in output.decode(errors="surrogateescape").split("\0"):
        if entry.startswith("# branch.oid "):
            oid = entry.removeprefix("# branch.oid ").strip()
            commit = None if oid == "(initial)" else oid
        elif entry.startswith("? "):
            untracked.append(entry[2:])
        elif entry[:2] in ("1 ", "2 ", "u "):
            changed = True
    return Status(commit=commit, changed=changed, untracked=untracked)


def environment_names_repository() -> bool:
    """GIT_DIR or GIT_WORK_TREE set: git does not go by the `.git` found above."""
    return bool(os.environ.get("GIT_DIR") or os.environ.get("GIT_WORK_TREE"))
