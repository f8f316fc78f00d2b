"""Which environment a run gets (issue 37 §2), through the API and a real runagentd: the
workdir's own virtual environment, or the one the run names; AgentSys's venv and secrets
never; the run's `env` last."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from scheduler_app.models import Run, RunStatus
from tests.helpers import run_ended
from tests.runtime_harness import DaemonProcess

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
OWN_BIN = str(Path(sys.prefix) / "bin")
SHOW = (
    'python -c "import os, sys, only_in_the_project as m; print(m.WHERE, sys.prefix); '
    "print('secret' if 'DATABASE_URL' in os.environ else 'no secret'); "
    "print(os.environ.get('SEED'), os.environ['PATH'].split(':')[0])\""
)


def make_venv(where: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    [site] = where.glob("lib/python*/site-packages")
    (site / "only_in_the_project.py").write_text("WHERE = 'project-venv'\n")
    return where


@pytest.fixture
def daemon():
    """A runagentd started as from an activated AgentSys venv: its bin/ first on PATH."""
    process = DaemonProcess(
        "env-host",
        AGENTSYS_GPUS="",
        PATH=os.pathsep.join([OWN_BIN, os.environ["PATH"]]),
        VIRTUAL_ENV=sys.prefix,
    )
    yield process
    process.stop()


def _log(run: Run) -> list[str]:
    return (Path(run.run_dir) / "run.log").read_text().splitlines()


def test_a_run_gets_its_workdirs_venv_and_its_env_and_none_of_agentsys(daemon, api, tmp_path):
    venv = make_venv(tmp_path / ".venv")
    made = api(
        "post",
        "/api/runs",
        {
            "name": "in its venv",
            "command": SHOW,
            "workdir": str(tmp_path),
            "env": {"SEED": 7},
            "auto_start": True,
        },
    )
    assert made.status_code == 201, made.json()
    assert made.json()["executor_options"]["env"] == {"SEED": "7"}

    run = run_ended(Run.objects.get(pk=made.json()["id"]), timeout=60)

    assert run.status == RunStatus.DONE, (run.error, _log(run))
    assert _log(run) == [f"project-venv {venv}", "no secret", f"7 {venv / 'bin'}"]


def test_a_named_venv_elsewhere_and_a_venv_that_is_none(daemon, api, tmp_path):
    venv = make_venv(tmp_path / "envs" / "exp")
    workdir = tmp_path / "project"
    workdir.mkdir()

    def run(venv_name):
        made = api(
            "post",
            "/api/runs",
            {
                "name": "named",
                "command": SHOW,
                "workdir": str(workdir),
                "venv": venv_name,
                "auto_start": True,
            },
        ).json()
        return run_ended(Run.objects.get(pk=made["id"]), timeout=60)

    named = run("../envs/exp")
    assert named.status == RunStatus.DONE, (named.error, _log(named))
    assert _log(named)[0] == f"project-venv {venv}"

    missing = run("nowhere")
    assert missing.status == RunStatus.FAILED
    assert "venv 'nowhere' is not a virtual environment" in missing.error


def test_without_a_project_venv_agentsys_venv_stays_out(daemon, api, tmp_path):
    command = 'python3 -c "import django"; echo VIRTUAL_ENV=$VIRTUAL_ENV; echo $PATH'
    made = api(
        "post",
        "/api/runs",
        {"name": "bare", "command": command, "workdir": str(tmp_path), "auto_start": True},
    ).json()
    run = run_ended(Run.objects.get(pk=made["id"]), timeout=60)

    log = _log(run)
    assert any("No module named 'django'" in line for line in log), log
    assert "VIRTUAL_ENV=" in log and OWN_BIN not in log[-1].split(":")


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("env", {"1X": "a"}, "env name '1X' is not a variable name"),
        ("env", {"CUDA_VISIBLE_DEVICES": "0"}, "env CUDA_VISIBLE_DEVICES is set by AgentSys"),
        ("env", {"A": {"b": 1}}, "env A must be a string, number or boolean"),
        ("env", ["A=1"], "env"),
        ("venv", "x" * 1001, "venv must be a path of at most 1000 characters"),
    ],
)
def test_a_bad_env_or_venv_is_422_naming_it(api, field, value, reason):
    response = api("post", "/api/runs", {"name": "x", "command": "true", field: value})

    assert response.status_code == 422
    assert reason in response.json()["detail"]
    assert not Run.objects.exists()


def test_a_sweeps_env_and_venv_go_to_its_runs_under_their_own(api, tmp_path):
    sweep = api(
        "post",
        "/api/sweeps",
        {"name": "s", "env": {"HF_HOME": "/data/hf", "SEED": 1}, "venv": "envs/a"},
    ).json()
    assert (sweep["env"], sweep["venv"]) == ({"HF_HOME": "/data/hf", "SEED": "1"}, "envs/a")

    run = api(
        "post",
        "/api/runs",
        {"name": "r", "command": "true", "sweep_id": sweep["id"], "env": {"SEED": 2}},
    ).json()
    assert run["executor_options"]["env"] == {"HF_HOME": "/data/hf", "SEED": "2"}
    assert run["executor_options"]["venv"] == "envs/a"

    batch = api(
        "post",
        "/api/runs/batch",
        {"sweep_id": sweep["id"], "runs": [{"name": "b", "command": "true", "venv": "envs/b"}]},
    ).json()
    assert batch[0]["executor_options"]["env"] == {"HF_HOME": "/data/hf", "SEED": "1"}
    assert batch[0]["executor_options"]["venv"] == "envs/b"


def test_a_run_in_the_persons_repository_leaves_their_git_status_alone(daemon, api, tmp_path):
    def git(*args):
        return subprocess.run(
            ["git", "-C", str(tmp_path), *args], check=True, capture_output=True, text=True
        ).stdout

    git("init", "-q")
    (tmp_path / "train.py").write_text("print('loss=0.5')\n")
    (tmp_path / "notes.md").write_text("my uncommitted notes\n")
    git("add", "train.py")
    git("-c", "user.name=p", "-c", "user.email=p@p", "commit", "-q", "-m", "mine")
    before = git("status", "--porcelain")
    made = api(
        "post",
        "/api/runs",
        {"name": "r", "command": "python3 train.py", "workdir": str(tmp_path), "auto_start": True},
    ).json()

    run = run_ended(Run.objects.get(pk=made["id"]), timeout=60)

    assert run.status == RunStatus.DONE and (Path(run.run_dir) / "run.log").exists()
    assert git("status", "--porcelain") == before == "?? notes.md\n"
    assert not (tmp_path / ".gitignore").exists()
