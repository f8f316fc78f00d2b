"""agentsys.git_status: a run's code is recorded from one `git status` (and a diff only when
something changed), and where a workdir sits in its repository is asked of git once, until
its `.git` is another one."""

from __future__ import annotations

import shutil

from agentsys import code_snapshot, git_status
from tests.unit.test_code_snapshot import git, repo


def test_status_gives_head_changes_and_untracked_files():
    out = (
        b"# branch.oid 0123456789abcdef0123456789abcdef01234567\0# branch.head main\0"
        b"1 .M N... 100644 100644 100644 aa bb train.py\0? new file.txt\0? dir/x.bin\0"
    )
    status = git_status.parse_status(out)
    assert status.commit == "0123456789abcdef0123456789abcdef01234567"
    assert status.changed and status.untracked == ["new file.txt", "dir/x.bin"]
    initial = git_status.parse_status(b"# branch.oid (initial)\0# branch.head main\0")
    assert (initial.commit, initial.changed, initial.untracked) == (None, False, [])
    assert git_status.parse_status(b"# branch.oid ab\0u UU N... x\0").changed


def _counting_git(monkeypatch) -> list[str]:
    calls: list[str] = []
    real = code_snapshot._git

    def counted(cwd, *args, **kwargs):
        calls.append(args[0])
        return real(cwd, *args, **kwargs)

    monkeypatch.setattr(code_snapshot, "_git", counted)
    return calls


def test_a_clean_tree_costs_one_git_call_and_a_changed_one_two(tmp_path, monkeypatch):
    work = repo(tmp_path / "work")
    code_snapshot.take(work)  # the first one asks where the workdir is
    calls = _counting_git(monkeypatch)
    assert code_snapshot.take(work).patch == b""
    assert calls == ["status"]
    (work / "config.py").write_text("LR = 0.5\n")
    calls.clear()
    snap = code_snapshot.take(work)
    assert b"+LR = 0.5" in snap.patch
    assert calls == ["status", "diff"]


def test_a_repository_made_again_in_the_same_folder_is_asked_again(tmp_path):
    work = repo(tmp_path / "work")
    first = code_snapshot.take(work)
    shutil.rmtree(work / ".git")
    git(work, "init", "-q", "-b", "main")
    (work / "config.py").write_text("LR = 0.9\n")
    git(work, "add", "-A")
    git(work, "commit", "-qm", "again")
    again = code_snapshot.take(work)
    assert again.commit == git(work, "rev-parse", "HEAD") != first.commit
    assert again.patch == b""


def test_a_workdir_that_became_a_repository_of_its_own_is_recorded_as_one(tmp_path):
    outer = repo(tmp_path / "outer")
    work = outer / "experiments"
    work.mkdir()
    (work / "run.py").write_text("print(1)\n")
    git(outer, "add", "-A")
    git(outer, "commit", "-qm", "experiments")
    assert code_snapshot.take(work).subdir == "experiments"
    inner = repo(work)  # the researcher made it a repository of its own
    snap = code_snapshot.take(inner)
    assert (snap.toplevel, snap.subdir) == (str(work), "")
    assert snap.commit == git(work, "rev-parse", "HEAD")


def test_a_workdir_that_left_its_repository_records_nothing(tmp_path):
    work = repo(tmp_path / "work")
    assert code_snapshot.take(work) is not None
    shutil.rmtree(work / ".git")
    assert code_snapshot.take(work) is None
