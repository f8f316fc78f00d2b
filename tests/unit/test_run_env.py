"""agentsys.run_env: a run gets the project's virtual environment, never AgentSys's, and
none of AgentSys's secrets; the run's own env wins. Real virtual environments, real Pythons."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentsys.run_env import RunEnvironmentError, project_venv, run_environment

OWN_BIN = str(Path(sys.prefix) / "bin")


def make_venv(where: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    [site] = where.glob("lib/python*/site-packages")
    (site / "only_in_the_project.py").write_text("WHERE = 'project venv'\n")
    return where


def run_python(env: dict[str, str], code: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["python", "-c", code], env=env, cwd=cwd, capture_output=True, text=True, timeout=60
    )


@pytest.fixture
def daemon_env() -> dict[str, str]:
    """A daemon started from an activated AgentSys venv, with its database and secrets."""
    return {
        "PATH": os.pathsep.join([OWN_BIN, "/usr/local/bin", "/usr/bin", "/bin"]),
        "VIRTUAL_ENV": sys.prefix,
        "HOME": os.environ.get("HOME", "/root"),
        "DATABASE_URL": "postgresql://agentsys:secret@127.0.0.1/agentsys",
        "DJANGO_SECRET_KEY": "k" * 50,
        "OPENCODE_SERVER_PASSWORD": "pw",
        "LANG": "C.UTF-8",
    }


def test_the_workdirs_venv_comes_first_and_agentsys_venv_and_secrets_stay_out(tmp_path, daemon_env):
    venv = make_venv(tmp_path / ".venv")

    env = run_environment(daemon_env, workdir=tmp_path)

    assert env["VIRTUAL_ENV"] == str(venv)
    assert env["PATH"].split(os.pathsep)[0] == str(venv / "bin")
    assert OWN_BIN not in env["PATH"].split(os.pathsep)
    assert not {"DATABASE_URL", "DJANGO_SECRET_KEY", "OPENCODE_SERVER_PASSWORD"} & env.keys()
    assert env["LANG"] == "C.UTF-8" and env["HOME"] == daemon_env["HOME"]
    # `python` is the project's: its packages import, AgentSys's do not.
    found = run_python(
        env, "import only_in_the_project as m, sys; print(m.WHERE, sys.prefix)", tmp_path
    )
    assert found.stdout.split() == ["project", "venv", str(venv)], found.stderr
    assert "No module named 'django'" in run_python(env, "import django", tmp_path).stderr


def test_no_project_venv_leaves_agentsys_venv_out_all_the_same(tmp_path, daemon_env):
    env = run_environment(daemon_env, workdir=tmp_path)

    assert "VIRTUAL_ENV" not in env
    assert env["PATH"].split(os.pathsep) == ["/usr/local/bin", "/usr/bin", "/bin"]


def test_a_named_venv_relative_or_absolute_and_the_runs_env_last(tmp_path, daemon_env):
    envs = make_venv(tmp_path / "envs" / "torch")
    workdir = tmp_path / "project"
    workdir.mkdir()

    relative = run_environment(daemon_env, workdir=workdir, venv="../envs/torch")
    absolute = run_environment(daemon_env, workdir=workdir, venv=str(envs))
    assert Path(relative["VIRTUAL_ENV"]).resolve() == envs == Path(absolute["VIRTUAL_ENV"])

    own = run_environment(
        daemon_env, workdir=workdir, venv=str(envs), env={"PATH": "/opt/mine", "SEED": 3}
    )
    assert own["PATH"] == "/opt/mine" and own["SEED"] == "3"  # a person's setting wins


def test_a_venv_that_is_none_is_refused_by_name(tmp_path, daemon_env):
    (tmp_path / "notavenv").mkdir()

    with pytest.raises(RunEnvironmentError, match=r"venv 'notavenv' is not a virtual environment"):
        run_environment(daemon_env, workdir=tmp_path, venv="notavenv")
    assert project_venv(tmp_path, None) is None  # no .venv: none, and no error
