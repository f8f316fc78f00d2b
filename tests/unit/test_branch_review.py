"""The loop page's branch card re-renders with the loop (htmx): an unchanged branch is not
read again (one `git rev-parse`, no `git log` nor `git diff`), a new commit shows at once."""

import subprocess
from pathlib import Path

import pytest

from agentsys.research.branch import LoopBranch
from research_app import branch_review
from tests.helpers import git


@pytest.fixture
def git_calls(monkeypatch) -> list[str]:
    """The git subcommand of each call branch_review makes (`git -C <repo> -c ... <it>`)."""
    branch_review._read.cache_clear()
    calls, run = [], subprocess.run

    def counted(argv, **kwargs):
        if argv[1] == "-C":  # branch_review's, not the test's own git
            calls.append(argv[argv.index("--no-pager") + 1])
        return run(argv, **kwargs)

    monkeypatch.setattr(branch_review.subprocess, "run", counted)
    yield calls
    branch_review._read.cache_clear()


def commit(repo: Path, text: str, message: str) -> None:
    (repo / "train.py").write_text(text)
    git("commit", "-q", "-am", message, cwd=repo)


def test_the_same_head_is_read_once_and_a_new_commit_shows_at_once(tmp_path, git_calls):
    git("init", "-q", "-b", "main", cwd=tmp_path)
    (tmp_path / "train.py").write_text("lr = 0.1\n")
    git("add", "train.py", cwd=tmp_path)
    git("commit", "-q", "-m", "start", cwd=tmp_path)
    base = git("rev-parse", "HEAD", cwd=tmp_path).strip()
    git("checkout", "-q", "-b", "agentsys/loop-1", cwd=tmp_path)
    commit(tmp_path, "lr = 0.05\n", "lower lr")
    loop = LoopBranch("agentsys/loop-1", base, str(tmp_path), str(tmp_path), str(tmp_path))

    first = branch_review.review(loop)
    assert [c.subject for c in first.commits] == ["lower lr"] and "+lr = 0.05" in first.diff
    assert git_calls == ["rev-parse", "log", "diff"]

    git_calls.clear()
    again = branch_review.review(loop)
    assert git_calls == ["rev-parse"]  # the head has not moved: nothing else is read
    assert again.commits == first.commits and again.diff == first.diff

    commit(tmp_path, "lr = 0.02\n", "lower it again")
    git_calls.clear()
    moved = branch_review.review(loop)
    assert [c.subject for c in moved.commits] == ["lower lr", "lower it again"]
    assert "+lr = 0.02" in moved.diff and git_calls == ["rev-parse", "log", "diff"]


def test_a_branch_git_cannot_read_says_so_and_is_read_again_next_time(tmp_path, git_calls):
    git("init", "-q", "-b", "main", cwd=tmp_path)
    loop = LoopBranch("agentsys/gone", "0" * 40, str(tmp_path), str(tmp_path), str(tmp_path))
    assert "git could not read" in branch_review.review(loop).trouble
    assert "git could not read" in branch_review.review(loop).trouble
    assert git_calls == ["rev-parse", "rev-parse"]
