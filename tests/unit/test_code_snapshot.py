"""agentsys.code_snapshot against real git repositories: what a run records of its workdir's
code, and that another host makes exactly those files again from it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from agentsys import code_snapshot
from agentsys.code_snapshot import CodeError

IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
}
BINARY = bytes(range(256)) * 40 + b"\x00\xff"


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args],
        cwd=cwd,
        env={**os.environ, **IDENTITY},
        capture_output=True,
        check=True,
        text=True,
    )
    return done.stdout.strip()


def repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    (path / "train.py").write_text("from config import LR\nprint('lr', LR)\n")
    (path / "config.py").write_text("LR = 0.1\n")
    (path / "gone.txt").write_text("deleted later\n")
    (path / ".gitignore").write_text("*.ckpt\n")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "first")
    return path


def files_of(root: Path) -> dict[str, bytes]:
    """Every file under root but git's and AgentSys's own, with its bytes."""
    found = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if relative.parts[0] in (".git", ".agents") or not path.is_file():
            continue
        found[str(relative)] = path.read_bytes()
    return found


def test_a_clean_work_tree_records_its_commit_and_no_patch(tmp_path):
    work = repo(tmp_path / "work")
    snap = code_snapshot.take(work)
    assert snap.commit == git(work, "rev-parse", "HEAD")
    assert snap.patch == b"" and snap.digest == "" and snap.files == 0
    assert snap.subdir == ""


def test_not_a_git_work_tree_records_nothing(tmp_path):
    (tmp_path / "plain").mkdir()
    assert code_snapshot.take(tmp_path / "plain") is None
    assert code_snapshot.take(tmp_path / "missing") is None
    git(tmp_path / "plain", "init", "-q")  # a repository with no commit yet: nothing to name
    assert code_snapshot.take(tmp_path / "plain") is None


def test_changes_untracked_and_binary_files_are_in_the_patch_and_the_index_is_untouched(
    tmp_path,
):
    work = repo(tmp_path / "work")
    (work / "config.py").write_text("LR = 0.25\n")
    (work / "gone.txt").unlink()
    (work / "new_module.py").write_text("VALUE = 42\n")
    (work / "weights.bin").write_bytes(BINARY)
    (work / "model.ckpt").write_bytes(b"ignored by .gitignore")
    (work / ".agents" / "runs" / "x").mkdir(parents=True)
    (work / ".agents" / "runs" / "x" / "run.log").write_text("a run's log, not code")
    index_before = (work / ".git" / "index").read_bytes()

    snap = code_snapshot.take(work)

    assert (work / ".git" / "index").read_bytes() == index_before
    assert "?? new_module.py" in git(work, "status", "--porcelain")  # still not staged
    patch = snap.patch.decode()
    assert "LR = 0.25" in patch and "new_module.py" in patch and "weights.bin" in patch
    assert "GIT binary patch" in patch and "gone.txt" in patch
    assert "model.ckpt" not in patch and ".agents" not in patch
    assert snap.files == 4 and len(snap.digest) == 64


def test_the_commit_and_patch_make_the_same_files_again_byte_for_byte(tmp_path):
    work = repo(tmp_path / "work")
    (work / "config.py").write_text("LR = 0.25\n")
    (work / "gone.txt").unlink()
    (work / "pkg").mkdir()
    (work / "pkg" / "new module.py").write_text("VALUE = 'ünïcode'\n")
    (work / "weights.bin").write_bytes(BINARY)
    snap = code_snapshot.take(work)
    data = code_snapshot.bundle(work, snap.commit)
    expected = files_of(work)

    target = tmp_path / "elsewhere" / "checkout"
    code_snapshot.materialize(tmp_path / "cache.git", target, snap.commit, snap.patch, data)

    assert files_of(target) == expected
    again = code_snapshot.take(target)  # another host that takes it finds the same code
    assert (again.commit, again.digest) == (snap.commit, snap.digest)


def test_a_remote_serves_the_commit_and_the_cache_keeps_it(tmp_path):
    work = repo(tmp_path / "work")
    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(work), str(remote))
    commit = git(work, "rev-parse", "HEAD")
    cache = tmp_path / "cache.git"

    code_snapshot.materialize(cache, tmp_path / "a", commit, remote=str(remote))
    assert (tmp_path / "a" / "config.py").read_text() == "LR = 0.1\n"
    # The remote gone, the cache still has it for the next run of the same commit.
    os.rename(remote, tmp_path / "moved.git")
    code_snapshot.materialize(cache, tmp_path / "b", commit, remote=str(remote))
    assert (tmp_path / "b" / "train.py").exists()


def test_a_workdir_inside_a_repository_records_where_it_is(tmp_path):
    work = repo(tmp_path / "work")
    (work / "exp").mkdir()
    (work / "exp" / "run.py").write_text("print(1)\n")
    snap = code_snapshot.take(work / "exp")
    assert snap.subdir == "exp" and snap.toplevel == str(work)
    assert "exp/run.py" in snap.patch.decode()
    (work / ".gitignore").write_text("scratch/\n")
    (work / "scratch").mkdir()
    assert code_snapshot.take(work / "scratch") is None  # ignored: the commit is not its code


def test_a_commit_nobody_can_serve_says_so(tmp_path):
    work = repo(tmp_path / "work")
    commit = git(work, "rev-parse", "HEAD")
    with pytest.raises(CodeError, match="no bundle of it is stored and the run names no"):
        code_snapshot.materialize(tmp_path / "cache.git", tmp_path / "t", commit)
    with pytest.raises(CodeError, match=f"from {tmp_path}/nowhere.git"):
        code_snapshot.materialize(
            tmp_path / "cache.git", tmp_path / "t", commit, remote=f"{tmp_path}/nowhere.git"
        )


def test_a_patch_that_does_not_apply_fails_with_gits_words(tmp_path):
    work = repo(tmp_path / "work")
    snap = code_snapshot.take(work)
    data = code_snapshot.bundle(work, snap.commit)
    bad = (
        b"diff --git a/nothere.py b/nothere.py\n--- a/nothere.py\n+++ b/nothere.py\n"
        b"@@ -1 +1 @@\n-x\n+y\n"
    )
    with pytest.raises(CodeError, match=r"git apply .*nothere\.py"):
        code_snapshot.materialize(tmp_path / "cache.git", tmp_path / "t", snap.commit, bad, data)


def test_too_large_changes_are_refused_with_the_reason(tmp_path):
    work = repo(tmp_path / "work")
    (work / "big.txt").write_text("x" * 5000)
    with pytest.raises(CodeError, match=r"over the 0\.0 MiB a run records: commit them"):
        code_snapshot.take(work, max_patch=1000)
    with pytest.raises(CodeError, match=r"packs to .* push it and name the run's code\.remote"):
        code_snapshot.bundle(work, git(work, "rev-parse", "HEAD"), max_bytes=10)


@pytest.mark.parametrize(
    "remote",
    ["https://github.com/a/b.git", "ssh://git@host/x.git", "git@github.com:a/b.git", "/srv/r.git"],
)
def test_remotes_git_can_fetch_from_are_accepted(remote):
    assert code_snapshot.check_remote(remote) == remote


@pytest.mark.parametrize(
    "remote",
    ["ext::sh -c touch% /tmp/pwned", "--upload-pack=evil", "relative/path", "fd::3", "/r\x00.git"],
)
def test_remotes_that_run_commands_or_are_options_are_refused(remote):
    with pytest.raises(CodeError, match="is not a git URL"):
        code_snapshot.check_remote(remote)


def test_a_bundle_on_top_of_an_earlier_one_holds_only_what_came_since(tmp_path):
    """A research loop commits every iteration: each bundle builds on the previous one, and
    a fresh host follows the chain back to what it has."""
    work = repo(tmp_path / "work")
    (work / "data.bin").write_bytes(os.urandom(200_000))  # a history worth not repeating
    git(work, "add", "-A")
    git(work, "commit", "-qm", "data")
    stored: dict[str, tuple[bytes, str]] = {}
    base = ""
    for step in range(3):
        commit = git(work, "rev-parse", "HEAD")
        assert not base or code_snapshot.is_ancestor(work, base, commit)
        stored[commit] = (code_snapshot.bundle(work, commit, base=base), base)
        base = commit
        (work / "config.py").write_text(f"LR = {step}\n")
        git(work, "commit", "-qam", f"iteration {step}")
    first, *later = stored.values()
    assert all(len(data) < len(first[0]) / 20 for data, _ in later)

    last = list(stored)[-1]
    code_snapshot.materialize(tmp_path / "cache.git", tmp_path / "t", last, bundle=stored.get)
    assert (tmp_path / "t" / "config.py").read_text() == "LR = 1\n"
    assert len((tmp_path / "t" / "data.bin").read_bytes()) == 200_000

    del stored[next(iter(stored))]  # the first is lost: the chain cannot be followed
    with pytest.raises(CodeError, match=r"no bundle of .*, on which the newer ones build"):
        code_snapshot.materialize(tmp_path / "other.git", tmp_path / "u", last, bundle=stored.get)
