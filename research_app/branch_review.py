"""A loop's branch as a change to review (its page): the commits from where it started, each
with the files it changed and their line counts, and the whole diff, read from the person's
repository with a timeout and a size cap. A repository this web server cannot read says so."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field

from agentsys.research.branch import LoopBranch

GIT_TIMEOUT_SECONDS = 10
MAX_COMMITS = 100
DIFF_LIMIT = 400_000
SEPARATOR = "\x1e"  # between commits in `git log`'s output


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
    span = f"{branch.base_commit}..{branch.name}"
    try:
        log = _git(
            branch,
            "log",
            "--abbrev=12",
            "--reverse",
            f"--max-count={MAX_COMMITS}",
            "--numstat",
            f"--format={SEPARATOR}%h%x00%s",
            span,
        )
        diff = _git(branch, "diff", "--stat", "--patch", branch.base_commit, branch.name)
    except (OSError, subprocess.SubprocessError, GitFailed) as error:
        return BranchReview(trouble=f"git could not read {branch.repository}: {error}")
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


def _git(branch: LoopBranch, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", branch.repository, "-c", "color.ui=never", "--no-pager", *args],
        capture_output=True,
        timeout=GIT_TIMEOUT_SECONDS,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    if done.returncode != 0:
        raise GitFailed(done.stderr.decode(errors="replace").strip()[:300])
    return done.stdout[: DIFF_LIMIT + 1].decode(errors="replace")
