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
COMMIT_HASH_CHARS = 12  # as the loop page's `git log --abbrev=12` shows them


@dataclass
class Commit:
    """What one commit of the loop took: its hash ("" when none was made) and the changed
    files it left out, each with why."""

    hash: str = ""
    left_out: dict[str, str] = field(default_factory=dict)


class Workspace:
    def __init__(self, workdir: Path, agent_id: str, *, commits: bool = True):
        self.workdir = workdir
        self.commits = commits  # False: a workdir that is not the loop's own worktree
        self.loop_dir = loop_dir_of(workdir, agent_id)
        self.tasks_path = self.loop_dir / TASKS_FILE
        self.log_path = self.loop_dir / ITERATION_LOG_FILE
        self.state_path = self.loop_dir / STATE_FILE
        self.snapshot_path = self.loop_dir / SNAPSHOT_FILE
        self.is_git: bool | None = None
        self.top = workdir  # the repository's top, once git_ready has asked
        self.prefix = ""  # the workdir from there ("sub/dir/"; "" at the top)

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
            result = await self.git("rev-parse", "--show-toplevel", "--show-prefix")
            lines = result.out.split("\n")
            self.is_git = result.ok and bool(lines[0].strip())
            if self.is_git:
                self.top, self.prefix = Path(lines[0]), lines[1] if len(lines) > 1 else ""
        return self.is_git

    async def _git_files(self) -> list[str]:
        result = await self.git("ls-files", "-z", "--cached", "--others", "--exclude-standard")
        return [p for p in result.out.split("\0") if p] if result.ok else []

    async def commit(
        self, message: str, allowed: tuple[str, ...] = (), changed: list[str] | None = None
    ) -> Commit:
        """Commit the project's changed code: never `.agents/`, never what the repository
        ignores, never outputs (commit_filter) unless a pattern of `allowed` names them.
        Only on the loop's own branch (`commits`): never into a branch of the person's.
        `changed`: the files the iteration's snapshots say changed (workdir-relative), so
        that git need not look at every file again; else `git status` finds them."""
        made = Commit()
        if not self.commits or not await self.git_ready():
            return made
        found = await (self._status() if changed is None else self._changed_or_staged(changed))
        if found is None:
            return made
        taken, staged_outputs = [], []
        for rel, staged in sorted(found.items()):  # rel: from the repository's top
            if f"/{AGENTS_DIR}/" in f"/{rel}" or rel.endswith("/"):
                continue  # AgentSys's own files; a repository inside (never taken whole)
            why = why_left_out(self.top, rel, allowed)
            if why is None:
                taken.append(rel)
            else:
                made.left_out[rel] = why
                if staged:  # by someone else (the model's own `git add`): not committed
                    staged_outputs.append(rel)
        if staged_outputs:
            await self._top_git(
                "reset", "-q", "--pathspec-from-file=-", "--pathspec-file-nul", paths=staged_outputs
            )
        if taken:
            made.hash = await self._commit_paths(taken, message)
        return made

    async def _status(self) -> dict[str, bool] | None:
        """Changed files (path → staged already), as `git status` sees them."""
        status = await self.git(
            "status", "--porcelain=v1", "-z", "-uall", "--no-renames", "--", "."
        )
        if not status.ok:
            return None
        entries = filter(None, status.out.split("\0"))
        return {entry[3:]: entry[0] not in " ?" for entry in entries}  # "XY path"

    async def _changed_or_staged(self, changed: list[str]) -> dict[str, bool] | None:
        staged = await self._top_git("diff-index", "--cached", "--name-only", "-z", "HEAD")
        if not staged.ok:
            return None
        found = {self.prefix + rel: False for rel in changed}
        found.update((rel, True) for rel in staged.out.split("\0") if rel)
        return found

    async def _commit_paths(self, paths: list[str], message: str) -> str:
        """Git's plumbing, not `git add` and `git commit`: those refresh and scan the whole
        tree again (three times the time on 10^4 files), which `status` has just done."""
        done = await self._top_git(
            "update-index", "--add", "--remove", "-z", "--stdin", paths=paths
        )
        if done.ok:
            done = await self._top_git("write-tree")
        if done.ok:
            tree = done.out.strip()
            done = await self.git("rev-parse", "HEAD^{tree}")
            if done.ok and done.out.strip() == tree:
                return ""  # only touched, not changed: nothing to commit
        if done.ok:
            done = await self.git("commit-tree", "-p", "HEAD", "-m", message, tree)
        if done.ok:
            commit = done.out.strip()
            done = await self.git("update-ref", "-m", f"commit: {message[:200]}", "HEAD", commit)
        if not done.ok:
            logger.warning("git could not commit in %s: %s", self.workdir, done.out.strip())
            return ""
        return commit[:COMMIT_HASH_CHARS]

    async def _top_git(self, *args: str, paths: list[str] | None = None) -> GitResult:
        stdin = "\0".join(paths).encode() if paths is not None else None
        return await git(self.top, *args, stdin=stdin)

    async def git(self, *args: str) -> GitResult:
        return await git(self.workdir, *args)
