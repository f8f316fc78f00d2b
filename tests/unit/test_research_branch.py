"""A research loop's own branch and worktree (issue 37 §1): the person's checked-out branch,
index and working tree stay as they were whatever the loop commits; their uncommitted
change goes into the loop only when they ask; nothing of AgentSys's is in their `git status`."""

import hashlib
import shutil
import subprocess
from pathlib import Path

from agentsys.git_exclude import keep_out_of_git
from agentsys.research import branch
from agentsys.research.workspace import Workspace
from tests.helpers import git


def in_shell(command: str) -> None:
    """As the person runs the printed command: pasted into their shell."""
    subprocess.run(["/bin/sh", "-c", command], check=True, capture_output=True)


def persons_repo(path: Path) -> Path:
    (path / "train.py").write_text("lr = 0.1\n")
    (path / "data.py").write_text("rows = 10\n")
    git("init", "-q", "-b", "main", cwd=path)
    git("add", "-A", cwd=path)
    git("commit", "-q", "-m", "start", cwd=path)
    # Their work in progress: one change staged, one not, one file git does not track yet.
    (path / "train.py").write_text("lr = 0.2  # trying\n")
    git("add", "train.py", cwd=path)
    (path / "data.py").write_text("rows = 20\n")
    (path / "notes.md").write_text("ideas\n")
    return path


def what_they_have(repo: Path) -> dict:
    """Their branch, HEAD, index (as git lists it) and every file's bytes, outside .git/."""
    files = {
        str(p.relative_to(repo)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(repo.rglob("*"))
        if p.is_file()
        and ".git" not in p.relative_to(repo).parts[:1]
        and ".agents" not in p.relative_to(repo).parts
    }
    return {
        "branch": git("symbolic-ref", "HEAD", cwd=repo),
        "head": git("rev-parse", "HEAD", cwd=repo),
        "index": git("ls-files", "--stage", cwd=repo),
        "files": files,
        "status": git("status", "--porcelain", "--untracked-files=all", cwd=repo),
    }


async def test_a_loop_commits_on_its_branch_and_leaves_the_persons_work_alone(tmp_path):
    repo = persons_repo(tmp_path)
    keep_out_of_git(repo, ".agents/")
    before = what_they_have(repo)

    opened, why = await branch.open_branch(repo, "research-ab12")
    assert why == "" and opened is not None
    assert opened.name == "agentsys/research-ab12"
    assert opened.base_commit == before["head"].strip()
    tree = Path(opened.workdir)
    # Their uncommitted change is not in the loop's copy: it starts from their HEAD.
    assert (tree / "train.py").read_text() == "lr = 0.1\n"
    assert not (tree / "notes.md").exists()

    work = Workspace(tree, "research-ab12")
    work.write_tasks("1. try lr")
    (tree / "train.py").write_text("lr = 0.05\n")
    (tree / "runs").mkdir()
    (tree / "runs" / "events.out.tfevents.1.h").write_bytes(b"\0tb")
    (tree / ".agents" / "runs" / "x").mkdir(parents=True)
    (tree / ".agents" / "runs" / "x" / "run.log").write_text("log\n")
    made = await work.commit("iteration 1")

    assert made.hash
    assert what_they_have(repo) == before
    assert git("log", "--format=%s", "main", cwd=repo).split("\n")[0] == "start"
    on_branch = git("diff", "--name-only", opened.base_commit, opened.name, cwd=repo).split()
    assert on_branch == ["train.py"]
    assert made.left_out == {"runs/events.out.tfevents.1.h": "a TensorBoard event file"}


async def test_the_persons_uncommitted_change_is_taken_only_when_asked(tmp_path):
    repo = persons_repo(tmp_path)
    keep_out_of_git(repo, ".agents/")
    before = what_they_have(repo)

    opened, _ = await branch.open_branch(repo, "research-cd34", include_uncommitted=True)

    tree = Path(opened.workdir)
    assert (tree / "train.py").read_text() == "lr = 0.2  # trying\n"
    assert (tree / "data.py").read_text() == "rows = 20\n"
    assert (tree / "notes.md").read_text() == "ideas\n"
    assert what_they_have(repo) == before


async def test_a_workdir_inside_the_repository_works_in_the_same_folder_of_the_worktree(
    tmp_path,
):
    repo = persons_repo(tmp_path)
    (repo / "exp").mkdir()
    (repo / "exp" / "run.py").write_text("print(1)\n")
    git("add", "exp", cwd=repo)
    git("commit", "-q", "-m", "exp", cwd=repo)
    keep_out_of_git(repo / "exp", ".agents/")

    opened, _ = await branch.open_branch(repo / "exp", "research-ef56")

    assert Path(opened.workdir) == repo / "exp" / ".agents" / "worktrees" / "research-ef56" / "exp"
    assert (Path(opened.workdir) / "run.py").is_file()
    found = await branch.workdir_in_worktree(repo / "exp", "research-ef56")
    assert found == Path(opened.workdir)
    assert git("status", "--porcelain", "--", "exp", cwd=repo) == ""


async def test_a_resumed_loop_gets_its_worktree_back_when_it_was_removed(tmp_path):
    repo = persons_repo(tmp_path)
    keep_out_of_git(repo, ".agents/")
    opened, _ = await branch.open_branch(repo, "research-0a0a")
    (Path(opened.workdir) / "train.py").write_text("lr = 0.3\n")
    await Workspace(Path(opened.workdir), "research-0a0a").commit("iteration 1")
    shutil.rmtree(opened.worktree)

    assert await branch.reopen(opened) == ""
    assert (Path(opened.workdir) / "train.py").read_text() == "lr = 0.3\n"


async def test_no_branch_outside_a_repository_or_before_its_first_commit(tmp_path):
    assert (await branch.open_branch(tmp_path, "research-1"))[1].endswith(
        "is not a git repository: no commits are made"
    )
    git("init", "-q", cwd=tmp_path)
    opened, why = await branch.open_branch(tmp_path, "research-1")
    assert opened is None and "without a commit" in why


def test_the_commands_merge_or_throw_away_the_branch(tmp_path):
    repo = persons_repo(tmp_path)
    keep_out_of_git(repo, ".agents/")
    git("stash", "-q", "-u", cwd=repo)  # a clean tree, for the merge
    import asyncio

    opened, _ = asyncio.run(branch.open_branch(repo, "research-77"))
    (Path(opened.workdir) / "train.py").write_text("lr = 0.05\n")
    asyncio.run(Workspace(Path(opened.workdir), "research-77").commit("iteration 1"))

    in_shell(opened.commands()["merge"])
    assert (repo / "train.py").read_text() == "lr = 0.05\n"
    in_shell(opened.commands()["discard"])
    assert not Path(opened.worktree).exists()
    assert "agentsys/research-77" not in git("branch", "--list", cwd=repo)
