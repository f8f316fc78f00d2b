"""AgentSys's own files stay out of a person's `git status` through .git/info/exclude, never
through their .gitignore (agentsys.git_exclude). Real git repositories."""

from __future__ import annotations

import subprocess

from agentsys import git_exclude
from agentsys.mcp.opencode_config import merge_servers


def git(repo, *args) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout


def make_repo(path):
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q")
    (path / "train.py").write_text("print('hi')\n")
    git(path, "add", "train.py")
    git(path, "-c", "user.name=p", "-c", "user.email=p@p", "commit", "-q", "-m", "mine")
    return path


def test_agentsys_files_leave_the_persons_status_and_gitignore_alone(tmp_path):
    repo = make_repo(tmp_path / "repo")
    (repo / ".agents" / "runs" / "r1").mkdir(parents=True)
    (repo / ".agents" / "runs" / "r1" / "run.log").write_text("x\n")
    assert ".agents/" in git(repo, "status", "--porcelain")

    assert git_exclude.keep_out_of_git(repo, ".agents/")
    assert git_exclude.keep_out_of_git(repo, ".agents/")  # again: nothing added twice

    assert git(repo, "status", "--porcelain") == ""
    assert not (repo / ".gitignore").exists()
    exclude = (repo / ".git" / "info" / "exclude").read_text().splitlines()
    assert exclude.count("/.agents/") == 1


def test_a_workdir_inside_a_repository_and_a_workdir_in_none(tmp_path):
    repo = make_repo(tmp_path / "repo")
    inside = repo / "experiments" / "a"
    (inside / ".agents").mkdir(parents=True)
    (inside / ".agents" / "state.json").write_text("{}")

    assert git_exclude.keep_out_of_git(inside, ".agents/")
    assert "/experiments/a/.agents/" in (repo / ".git" / "info" / "exclude").read_text()
    assert git(repo, "status", "--porcelain") == ""
    plain = tmp_path / "plain"
    plain.mkdir()
    assert not git_exclude.keep_out_of_git(plain, ".agents/")  # no repository: no error


def test_the_mcp_config_agentsys_wrote_is_excluded_a_tracked_one_stays_the_persons(tmp_path):
    repo = make_repo(tmp_path / "repo")
    entry = {"type": "local", "command": ["/opt/agentsys/.venv/bin/python", "-m", "x"]}

    merge_servers(repo, {"research-agent": entry})

    assert (repo / "opencode.json").exists()
    assert git(repo, "status", "--porcelain") == ""  # ours, with this machine's paths
    theirs = make_repo(tmp_path / "theirs")
    (theirs / "opencode.json").write_text('{"mcp": {}}\n')
    git(theirs, "add", "opencode.json")
    git(theirs, "-c", "user.name=p", "-c", "user.email=p@p", "commit", "-q", "-m", "cfg")
    merge_servers(theirs, {"research-agent": entry})
    assert git(theirs, "status", "--porcelain") == " M opencode.json\n"  # theirs to commit
    assert "opencode.json" not in (theirs / ".git" / "info" / "exclude").read_text()
