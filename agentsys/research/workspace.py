"""The research loop's workdir: its files under `.agents/wild/<agent id>/`, the snapshot and
diff that say which files an iteration changed, and one git commit per iteration.

Every git call has a timeout and none can fail the loop: a workdir that is not a git
repository (or whose git is broken) still works, without commits. `.agents/` is never
committed: it holds run logs and the loop's own files, not the project's work.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from agentsys.run_dir import (
    AGENTS_DIR,
    ITERATION_LOG_FILE,
    SNAPSHOT_FILE,
    STATE_FILE,
    TASKS_FILE,
    loop_dir_of,
)

logger = logging.getLogger("agentsys.research")

GIT_TIMEOUT = 30.0
MAX_SNAPSHOT_FILES = 20_000  # a workdir with more than this is diffed on its first files only
SKIPPED_DIRS = {AGENTS_DIR, ".git", "node_modules", "__pycache__", ".venv", ".mypy_cache"}
# Commits are made by AgentSys, whoever runs it and whatever git's own config says.
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "AgentSys",
    "GIT_AUTHOR_EMAIL": "agentsys@localhost",
    "GIT_COMMITTER_NAME": "AgentSys",
    "GIT_COMMITTER_EMAIL": "agentsys@localhost",
}


@dataclass(frozen=True)
class GitResult:
    code: int
    out: str


class Workspace:
    def __init__(self, workdir: Path, agent_id: str):
        self.workdir = workdir
        self.loop_dir = loop_dir_of(workdir, agent_id)
        self.tasks_path = self.loop_dir / TASKS_FILE
        self.log_path = self.loop_dir / ITERATION_LOG_FILE
        self.state_path = self.loop_dir / STATE_FILE
        self.snapshot_path = self.loop_dir / SNAPSHOT_FILE
        self.is_git: bool | None = None

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
            result = await self.git("rev-parse", "--is-inside-work-tree")
            self.is_git = result.code == 0 and result.out.strip() == "true"
        return self.is_git

    async def _git_files(self) -> list[str]:
        result = await self.git("ls-files", "-z", "--cached", "--others", "--exclude-standard")
        return [p for p in result.out.split("\0") if p] if result.code == 0 else []

    async def commit(self, message: str) -> str:
        """Commit the project's changes (never `.agents/`); the new commit's hash, or "" when
        nothing changed or it is not a repository."""
        if not await self.git_ready():
            return ""
        outside_agents = (".", f":(exclude){AGENTS_DIR}")
        status = await self.git("status", "--porcelain", "--", *outside_agents)
        if status.code != 0 or not status.out.strip():
            return ""
        # `.agents/` is in the repository's info/exclude (agentsys.git_exclude): naming it in
        # an exclude pathspec would make `git add` fail on an ignored path. Unstaged after,
        # for a repository whose exclude file could not be written.
        added = await self.git("add", "-A", "--", ".")
        if added.code == 0:
            added = await self.git("rm", "-r", "-q", "--cached", "--ignore-unmatch", AGENTS_DIR)
        if added.code != 0:
            logger.warning("git add failed in %s: %s", self.workdir, added.out.strip())
            return ""
        done = await self.git("commit", "-q", "--no-verify", "-m", message)
        if done.code != 0:
            logger.warning("git commit failed in %s: %s", self.workdir, done.out.strip())
            return ""
        head = await self.git("rev-parse", "--short", "HEAD")
        return head.out.strip() if head.code == 0 else ""

    async def git(self, *args: str) -> GitResult:
        try:
            process = await asyncio.create_subprocess_exec(
                "git",
                "-C",
                str(self.workdir),
                *args,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                env={**os.environ, **GIT_IDENTITY, "GIT_TERMINAL_PROMPT": "0"},
            )
        except OSError as error:  # no git on this machine
            return GitResult(127, str(error))
        try:
            out, _ = await asyncio.wait_for(process.communicate(), GIT_TIMEOUT)
        except TimeoutError:
            process.kill()
            await process.wait()
            return GitResult(124, f"git {args[0]} timed out after {GIT_TIMEOUT:.0f} s")
        return GitResult(process.returncode or 0, out.decode(errors="replace"))
