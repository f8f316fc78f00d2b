"""The research loop's workdir (issue 10 item 8): which files an iteration changed, one commit
per iteration only when the project changed, `.agents/` never committed, and a workdir that
is not a git repository working without commits."""

import os

import pytest

from agentsys.git_exclude import keep_out_of_git
from agentsys.research.workspace import Workspace
from tests.helpers import git


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
    commit = (await work.commit("iteration 1")).hash
    assert commit and commit == git("rev-parse", "--short=12", "HEAD", cwd=tmp_path).strip()
    files = git("show", "--name-only", "--format=", "HEAD", cwd=tmp_path).split()
    assert files == ["notes.md", "train.py"]
    assert git("ls-files", cwd=tmp_path).split() == ["notes.md", "train.py"]


async def test_nothing_changed_means_no_commit(tmp_path):
    work = Workspace(repo(tmp_path), "orchestrator-1")
    work.write_tasks("1. plan")
    assert (await work.commit("plan")).hash == ""
    assert len(git("log", "--format=%h", cwd=tmp_path).split()) == 1


async def test_a_workdir_that_is_not_a_repository_works_without_commits(tmp_path):
    work = Workspace(tmp_path, "orchestrator-1")
    (tmp_path / "a.py").write_text("x")
    before = await work.snapshot()
    (tmp_path / "a.py").write_text("xy")
    assert work.changed(before, await work.snapshot()) == ["a.py"]
    assert await work.git_ready() is False
    assert (await work.commit("iteration 1")).hash == ""


async def test_a_saved_snapshot_reads_back(tmp_path):
    work = Workspace(tmp_path, "orchestrator-1")
    (tmp_path / "a b.py").write_text("x")
    snap = await work.snapshot()
    work.save_snapshot(snap)
    assert work.load_snapshot() == snap


async def test_a_commit_takes_code_and_leaves_outputs_out_saying_why(tmp_path):
    """Issue 37 §1: outputs by their kind stay out of a loop's commit, unless allowed."""
    work = Workspace(repo(tmp_path), "research-1")
    (tmp_path / ".gitignore").write_text("*.log\n")
    git("add", ".gitignore", cwd=tmp_path)
    git("commit", "-q", "-m", "ignore logs", cwd=tmp_path)
    (tmp_path / "train.py").write_text("print(3)\n")
    (tmp_path / "model.py").write_text("class Net: pass\n")
    (tmp_path / "runs" / "sgd").mkdir(parents=True)
    (tmp_path / "runs" / "sgd" / "events.out.tfevents.1.host").write_bytes(b"\0tb")
    (tmp_path / "mlruns" / "0").mkdir(parents=True)
    (tmp_path / "mlruns" / "0" / "meta.yaml").write_text("name: x\n")
    (tmp_path / "wandb").mkdir()
    (tmp_path / "wandb" / "settings").write_text("x\n")
    (tmp_path / "best.pt").write_bytes(b"weights")
    (tmp_path / "model.safetensors").write_bytes(b"weights")
    (tmp_path / "table.bin").write_bytes(b"\0" * 1_500_000)
    (tmp_path / "big.csv").write_text("1,2\n" * 2_700_000)  # 10.8 MB of text
    (tmp_path / "small.bin").write_bytes(b"\0" * 1000)  # a small binary is code's business
    (tmp_path / "train.log").write_text("ignored by the repository\n")

    made = await work.commit("iteration 1")

    files = git("show", "--name-only", "--format=", "HEAD", cwd=tmp_path).split()
    assert files == ["model.py", "small.bin", "train.py"]
    assert made.left_out == {
        "best.pt": "a checkpoint (*.pt)",
        "big.csv": "over 10 MB (11 MB)",
        "mlruns/0/meta.yaml": "an MLflow store (mlruns/)",
        "model.safetensors": "a checkpoint (*.safetensors)",
        "runs/sgd/events.out.tfevents.1.host": "a TensorBoard event file",
        "table.bin": "a binary file over 1 MB (1.5 MB)",
        "wandb/settings": "W&B's files (wandb/)",
    }
    allowed = await work.commit("iteration 2", allowed=("*.pt", "mlruns/*"))
    files = git("show", "--name-only", "--format=", "HEAD", cwd=tmp_path).split()
    assert files == ["best.pt", "mlruns/0/meta.yaml"]
    assert "best.pt" not in allowed.left_out and "table.bin" in allowed.left_out


async def test_a_deleted_file_is_committed_as_deleted(tmp_path):
    work = Workspace(repo(tmp_path), "research-1")
    (tmp_path / "train.py").unlink()
    assert (await work.commit("iteration 1")).hash
    assert git("ls-files", cwd=tmp_path).split() == []


async def test_an_iteration_commits_what_its_snapshots_say_changed(tmp_path):
    """The loop hands its snapshots' list (git looks at those files only): a file only
    touched makes no commit; an output the model staged itself stays out all the same."""
    work = Workspace(repo(tmp_path), "research-1")
    before = await work.snapshot()
    os.utime(tmp_path / "train.py")  # touched, not changed
    after = await work.snapshot()
    touched = await work.commit("iteration 1", changed=work.changed(before, after))
    assert touched.hash == "" and len(git("log", "--format=%h", cwd=tmp_path).split()) == 1

    (tmp_path / "train.py").write_text("print(4)\n")
    (tmp_path / "last.ckpt").write_bytes(b"weights")
    git("add", "last.ckpt", cwd=tmp_path)  # as a model's own `git add` would
    made = await work.commit("iteration 2", changed=["train.py"])

    assert git("show", "--name-only", "--format=", "HEAD", cwd=tmp_path).split() == ["train.py"]
    assert made.left_out == {"last.ckpt": "a checkpoint (*.ckpt)"}
    assert "last.ckpt" not in git("ls-files", "--cached", cwd=tmp_path)


async def test_a_workspace_that_is_not_the_loops_own_worktree_commits_nothing(tmp_path):
    work = Workspace(repo(tmp_path), "research-1", commits=False)
    (tmp_path / "train.py").write_text("print(5)\n")
    assert (await work.commit("iteration 1")).hash == ""
    assert len(git("log", "--format=%h", cwd=tmp_path).split()) == 1
