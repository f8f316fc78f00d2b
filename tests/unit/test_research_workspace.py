"""The research loop's workdir (issue 10 item 8): which files an iteration changed, one commit
per iteration only when the project changed, `.agents/` never committed, and a workdir that
is not a git repository working without commits."""

import subprocess

import pytest

from agentsys.git_exclude import keep_out_of_git
from agentsys.research.workspace import Workspace


def git(*args, cwd):
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def repo(path):
    (path / "train.py").write_text("print(1)\n")
    git("init", "-q", cwd=path)
    git("add", "-A", cwd=path)
    git("commit", "-q", "-m", "start", cwd=path)
    return path


@pytest.mark.parametrize("excluded", [False, True], ids=["plain", "in-info-exclude"])
async def test_an_iteration_commits_its_changes_but_never_agents(tmp_path, excluded):
    work = Workspace(repo(tmp_path), "orchestrator-1")
    if excluded:  # as a loop's start leaves it (agentsys.git_exclude): git add must not fail
        assert keep_out_of_git(tmp_path, ".agents/")
    before = await work.snapshot()
    (tmp_path / "train.py").write_text("print(2)\n")
    (tmp_path / "notes.md").write_text("lr=0.1\n")
    work.append_log("## Iteration 1")  # under .agents/wild/
    (tmp_path / ".agents" / "runs").mkdir(parents=True)
    (tmp_path / ".agents" / "runs" / "run.log").write_text("x")
    assert work.changed(before, await work.snapshot()) == ["notes.md", "train.py"]
    commit = await work.commit("iteration 1")
    assert commit and commit in git("log", "--format=%h", cwd=tmp_path)
    files = git("show", "--name-only", "--format=", "HEAD", cwd=tmp_path).split()
    assert files == ["notes.md", "train.py"]
    assert git("ls-files", cwd=tmp_path).split() == ["notes.md", "train.py"]


async def test_nothing_changed_means_no_commit(tmp_path):
    work = Workspace(repo(tmp_path), "orchestrator-1")
    work.write_tasks("1. plan")
    assert await work.commit("plan") == ""
    assert len(git("log", "--format=%h", cwd=tmp_path).split()) == 1


async def test_a_workdir_that_is_not_a_repository_works_without_commits(tmp_path):
    work = Workspace(tmp_path, "orchestrator-1")
    (tmp_path / "a.py").write_text("x")
    before = await work.snapshot()
    (tmp_path / "a.py").write_text("xy")
    assert work.changed(before, await work.snapshot()) == ["a.py"]
    assert await work.git_ready() is False
    assert await work.commit("iteration 1") == ""


async def test_a_saved_snapshot_reads_back(tmp_path):
    work = Workspace(tmp_path, "orchestrator-1")
    (tmp_path / "a b.py").write_text("x")
    snap = await work.snapshot()
    work.save_snapshot(snap)
    assert work.load_snapshot() == snap
