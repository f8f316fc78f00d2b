"""A research loop's own branch: `agentsys/<loop id>`, made from the person's HEAD when the loop
starts, checked out in a worktree of its own at `<workdir>/.agents/worktrees/<loop id>/`.

The loop, its model (OpenCode works in the worktree) and its runs work there; its commits go
to that branch. The person's checked-out branch, index and working tree are never touched:
their uncommitted changes are taken into the loop only when they ask for it at the start
(`include_uncommitted`), as the branch's first commit. `.agents/` is in the repository's
`info/exclude` (agentsys.git_exclude), so the worktree is in no one's `git status`.

When the loop ends the branch is a change to review: merged or thrown away by the two
commands `commands()` prints; nothing is merged for the person.
"""

from __future__ import annotations

import logging
import shlex
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

from agentsys.research.git import git
from agentsys.run_dir import AGENTS_DIR

logger = logging.getLogger("agentsys.research")

BRANCH_PREFIX = "agentsys/"
WORKTREES_DIR = "worktrees"
# The person's hooks are theirs: a worktree made or a commit written by the loop runs none.
NO_HOOKS = ("-c", "core.hooksPath=/dev/null")


@dataclass(frozen=True)
class LoopBranch:
    name: str  # agentsys/<loop id>
    base_commit: str  # the person's HEAD when the loop started
    repository: str  # the person's repository (its top)
    worktree: str  # the loop's worktree (its top)
    workdir: str  # the loop's workdir: the person's, inside the worktree

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data) -> LoopBranch | None:
        if not isinstance(data, dict):
            return None
        try:
            found = cls(**{k: str(data[k]) for k in cls.__dataclass_fields__})
        except KeyError:
            return None
        return found if found.name and found.worktree else None

    def commands(self) -> dict[str, str]:
        """The two commands, for the person's shell, that end the branch's life."""
        repo, tree = shlex.quote(self.repository), shlex.quote(self.worktree)
        return {
            "merge": f"git -C {repo} merge --no-ff {self.name}",
            "discard": (
                f"git -C {repo} worktree remove --force {tree} && "
                f"git -C {repo} branch -D {self.name}"
            ),
        }


def worktree_of(workdir: Path, loop_id: str) -> Path:
    return workdir / AGENTS_DIR / WORKTREES_DIR / loop_id


async def open_branch(
    workdir: Path, loop_id: str, *, include_uncommitted: bool = False
) -> tuple[LoopBranch | None, str]:
    """The loop's branch and worktree, made now; (None, why) when `workdir` is in no
    repository with a commit, or git refuses (the loop then works in place without commits)."""
    found = await git(workdir, "rev-parse", "--show-toplevel", "--show-prefix", "HEAD")
    lines = found.out.splitlines()
    if not found.ok or len(lines) != 3:
        inside = await git(workdir, "rev-parse", "--is-inside-work-tree")
        if inside.ok:
            return None, f"{workdir} is a git repository without a commit: no commits are made"
        return None, f"{workdir} is not a git repository: no commits are made"
    top, prefix, head = lines
    tree = worktree_of(workdir, loop_id)
    branch = LoopBranch(
        name=BRANCH_PREFIX + loop_id,
        base_commit=head,
        repository=top,
        worktree=str(tree),
        workdir=str(tree / prefix) if prefix else str(tree),
    )
    made = await git(top, *NO_HOOKS, "worktree", "add", "-q", "-b", branch.name, str(tree), head)
    if not made.ok:
        logger.warning("no worktree for %s in %s: %s", loop_id, top, made.out.strip())
        return None, f"git could not make the loop's worktree: {made.out.strip()[:300]}"
    if include_uncommitted:
        await _bring_uncommitted(Path(top), tree)
    return branch, ""


async def reopen(branch: LoopBranch) -> str:
    """A resumed loop's worktree, made again from its branch when it is gone ("" when it is
    there or was made; why not otherwise)."""
    if (Path(branch.worktree) / ".git").exists():
        return ""
    await git(branch.repository, "worktree", "prune")
    made = await git(
        branch.repository, *NO_HOOKS, "worktree", "add", "-q", branch.worktree, branch.name
    )
    return "" if made.ok else f"git could not make the worktree again: {made.out.strip()[:300]}"


async def _bring_uncommitted(top: Path, tree: Path) -> None:
    """The person's uncommitted changes (staged or not, and files git does not track yet)
    copied into the worktree: read from their repository, nothing of it written."""
    diff = await git(top, "diff", "--binary", "HEAD", "--", ".", f":(exclude){AGENTS_DIR}")
    if diff.ok and diff.data.strip():
        applied = await git(tree, "apply", "--binary", "--whitespace=nowarn", stdin=diff.data)
        if not applied.ok:
            logger.warning("the researcher's changes did not apply: %s", applied.out.strip())
    others = await git(top, "ls-files", "-z", "--others", "--exclude-standard")
    for rel in filter(None, others.out.split("\0") if others.ok else []):
        if f"/{AGENTS_DIR}/" in f"/{rel}":
            continue
        target = tree / rel
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(top / rel, target, follow_symlinks=False)
        except OSError as error:
            logger.warning("could not copy %s into the loop's worktree: %s", rel, error)


async def workdir_in_worktree(workdir: Path, loop_id: str) -> Path | None:
    """Where a loop started on `workdir` works if it made a worktree (it may not have):
    how a resumed loop finds its saved state before it knows its branch."""
    found = await git(workdir, "rev-parse", "--show-prefix")
    if not found.ok:
        return None
    return worktree_of(workdir, loop_id) / found.out.strip()
