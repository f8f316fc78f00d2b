"""The research loop's workdir (its worktree's, agentsys.research.branch): its files under
`.agents/wild/<agent id>/`, the snapshot and diff that say which files an iteration changed,
and one git commit per iteration, of code only (agentsys.research.commit_filter).

Every git call has a timeout and none can fail the loop: a workdir that is not a git
repository (or whose git is broken) still works, without commits. `.agents/` is never
committed: it holds run logs and the loop's own files, not the project's work.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from agentsys.research.commit_filter import why_left_out
from agentsys.research.git import GitResult, git
from agentsys.run_dir import (
    AGENTS_DIR,
    ITERATION_LOG_FILE,
    SNAPSHOT_FILE,
    STATE_FILE,
    TASKS_FILE,
    loop_dir_of,
)

logger = logging.getLogger("agentsys.research")

MAX_SNAPSHOT_FILES = 20_000  # a workdir with more than this is diffed on its first files only
SKIPPED_DIRS = {AGENTS_DIR, ".git", "node_modules", "__pycache__", ".venv", ".mypy_cache"}
COMMITTED = re.compile(r"^\[[^\]]*?([0-9a-f]{7,40})\]", re.MULTILINE)


@dataclass
class Commit:
    """What one commit of the loop took: its hash ("" when none was made) and the changed
    files it left out, each with why."""

    hash: str = ""
    left_out: dict[str, str] = field(default_factory=dict)


class Workspace:
    def __init__(self, workdir: Path, agent_id: str):
        self.workdir = workdir
        self.loop_dir = loop_dir_of(workdir, agent_id)
        self.tasks_path = self.loop_dir / TASKS_FILE
        self.log_path = self.loop_dir / ITERATION_LOG_FILE
        self.state_path = self.loop_dir / STATE_FILE
        self.snapshot_path = self.loop_dir / SNAPSHOT_FILE
        self.is_git: bool | None = None
        self.top = workdir  # the repository's top, once git_ready has asked

    # -- files of the loop -------------------------------------------------------------------

    def write_tasks(self, plan: str) -> None:
        self.loop_dir.mkdir(parents=True, exist_ok=True)
        self.tasks_path.write_text(plan.strip() + "\n")

    def append_log(self, text: str) -> None:
        self.loop_dir.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("a") as log:
            log.write(text.rstrip() + "\n\n")

    # -- which files an iteration changed ----------------------------------------------------

    async def snapshot(self) -> dict[str, tuple[int, int]]:
        """path → (mtime_ns, size) of the project's files (git's view when it is a repo:
        tracked and untracked, ignored ones left out)."""
        paths = await self._git_files() if await self.git_ready() else None
        return await asyncio.to_thread(self._stat_all, paths)

    def _stat_all(self, paths: list[str] | None) -> dict[str, tuple[int, int]]:
        found: dict[str, tuple[int, int]] = {}
        for rel in paths if paths is not None else self._walk():
            if len(found) >= MAX_SNAPSHOT_FILES:
                break
            if rel.split("/", 1)[0] in SKIPPED_DIRS:
                continue
            try:
                st = os.stat(self.workdir / rel)
            except OSError:
                continue
            found[rel] = (st.st_mtime_ns, st.st_size)
        return found

    def _walk(self):
        for root, dirs, files in os.walk(self.workdir):
            dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS]
            for name in files:
                yield os.path.relpath(os.path.join(root, name), self.workdir)

    @staticmethod
    def changed(before: dict, after: dict) -> list[str]:
        return sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))

    def save_snapshot(self, snap: dict[str, tuple[int, int]]) -> None:
        self.loop_dir.mkdir(parents=True, exist_ok=True)
        lines = (f"{m} {s} {p}" for p, (m, s) in snap.items())
        self.snapshot_path.write_text("\n".join(lines))

    def load_snapshot(self) -> dict[str, tuple[int, int]] | None:
        try:
            text = self.snapshot_path.read_text()
        except OSError:
            return None
        snap = {}
        for line in text.splitlines():
            parts = line.split(" ", 2)
            if len(parts) == 3 and parts[0].isdigit() and parts[1].isdigit():
                snap[parts[2]] = (int(parts[0]), int(parts[1]))
        return snap

    # -- git ---------------------------------------------------------------------------------

    async def git_ready(self) -> bool:
        if self.is_git is None:
            result = await self.git("rev-parse", "--show-toplevel")
            self.is_git = result.ok and bool(result.out.strip())
            self.top = Path(result.out.strip()) if self.is_git else self.workdir
        return self.is_git

    async def _git_files(self) -> list[str]:
        result = await self.git("ls-files", "-z", "--cached", "--others", "--exclude-standard")
        return [p for p in result.out.split("\0") if p] if result.ok else []

    async def commit(self, message: str, allowed: tuple[str, ...] = ()) -> Commit:
        """Commit the project's changed code: never `.agents/`, never what the repository
        ignores, never outputs (commit_filter) unless a pattern of `allowed` names them."""
        made = Commit()
        if not await self.git_ready():
            return made
        status = await self.git(
            "status", "--porcelain=v1", "-z", "-uall", "--no-renames", "--", "."
        )
        if not status.ok:
            return made
        taken = []
        for entry in filter(None, status.out.split("\0")):
            rel = entry[3:]  # "XY path", the path from the repository's top
            if f"/{AGENTS_DIR}/" in f"/{rel}" or rel.endswith("/"):
                continue  # AgentSys's own files; a repository inside (never taken whole)
            why = why_left_out(self.top, rel, allowed)
            if why is None:
                taken.append(rel)
            else:
                made.left_out[rel] = why
        if not taken:
            return made
        paths = "\0".join(taken).encode()
        added = await git(
            self.top, "add", "-A", "--pathspec-from-file=-", "--pathspec-file-nul", stdin=paths
        )
        if not added.ok:
            logger.warning("git add failed in %s: %s", self.workdir, added.out.strip())
            return made
        done = await self.git("commit", "--no-verify", "-m", message)
        found = COMMITTED.search(done.out) if done.ok else None
        if found is None:
            logger.warning("git commit failed in %s: %s", self.workdir, done.out.strip())
            return made
        made.hash = found.group(1)
        return made

    async def git(self, *args: str) -> GitResult:
        return await git(self.workdir, *args)
