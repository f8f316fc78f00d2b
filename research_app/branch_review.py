"""A loop's branch as a change to review (its page): the commits from where it started, each
with the files it changed and their line counts, and the whole diff, read from the person's
repository with a timeout and a size cap. A repository this web server cannot read says so.

The page re-renders (htmx) as the loop moves, most often with no new commit: what `git log`
and `git diff` said is kept by the branch's head (one `git rev-parse` a render), in a small
bounded cache, so a new commit shows at once and an unchanged branch costs one cheap call."""

from __future__ import annotations

import functools
import subprocess
from dataclasses import dataclass, field

from agentsys.research.branch import LoopBranch

GIT_TIMEOUT_SECONDS = 10
MAX_COMMITS = 100
DIFF_LIMIT = 400_000
SEPARATOR = "\x1e"  # between commits in `git log`'s output
CACHED_REVIEWS = 32  # branches reviewed, each up to DIFF_LIMIT of diff: a few MB at most


@dataclass
class ChangedFile:
    path: str
    added: str  # "-" for a binary file, as git says it
    deleted: str


@dataclass
class BranchCommit:
    hash: str
    subject: str
    files: list[ChangedFile] = field(default_factory=list)


@dataclass
class BranchReview:
    commits: list[BranchCommit] = field(default_factory=list)
    diff: str = ""
    diff_cut: bool = False
    trouble: str = ""  # why the repository could not be read


def review(branch: LoopBranch) -> BranchReview:
    """The branch as it is now: read again only when its head (or base) moved. The review
    returned is shared with the renders after it: read it, do not change it."""
    try:
        head = _git(branch.repository, "rev-parse", "--verify", f"{branch.name}^{{commit}}")
        return _read(branch.repository, branch.base_commit, head.strip())
    except (OSError, subprocess.SubprocessError, GitFailed) as error:
        return BranchReview(trouble=f"git could not read {branch.repository}: {error}")


# Keyed by the head commit, not the branch's name: what is read is what it is kept under, even
# if the branch moves meanwhile. A failure raises, so it is not kept: it is tried again.
@functools.lru_cache(maxsize=CACHED_REVIEWS)
def _read(repository: str, base: str, head: str) -> BranchReview:
    log = _git(
        repository,
        "log",
        "--abbrev=12",
        "--reverse",
        f"--max-count={MAX_COMMITS}",
        "--numstat",
        f"--format={SEPARATOR}%h%x00%s",
        f"{base}..{head}",
    )
    diff = _git(repository, "diff", "--stat", "--patch", base, head)
    found = BranchReview(commits=_commits(log), diff=diff[:DIFF_LIMIT])
    found.diff_cut = len(diff) > DIFF_LIMIT
    return found


def _commits(log: str) -> list[BranchCommit]:
    commits = []
    for block in filter(None, log.split(SEPARATOR)):
        head, _, stats = block.partition("\n")
        sha, _, subject = head.partition("\0")
        commit = BranchCommit(hash=sha, subject=subject)
        for line in filter(None, stats.splitlines()):
            parts = line.split("\t", 2)
            if len(parts) == 3:
                commit.files.append(ChangedFile(path=parts[2], added=parts[0], deleted=parts[1]))
        commits.append(commit)
    return commits


class GitFailed(Exception):
    pass


def _git(repository: str, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", repository, "-c", "color.ui=never", "--no-pager", *args],
        capture_output=True,
        timeout=GIT_TIMEOUT_SECONDS,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    if done.returncode != 0:
        raise GitFailed(done.stderr.decode(errors="replace").strip()[:300])
    return done.stdout[: DIFF_LIMIT + 1].decode(errors="replace")
