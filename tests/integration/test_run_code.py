"""The code that ran is the code recorded (issue 24, part 3): a run records its workdir's git
commit and uncommitted changes where it is made; a runagentd on a host that does not see the
workdir checks that code out (from the bundle stored in PostgreSQL, or the remote the run
names) in a folder of its own and runs it there. Real runagentd processes, real git."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from scheduler_app.models import CodeBundle, CodePatch, Run
from tests.helpers import wait_until
from tests.runtime_harness import DaemonProcess, events, wait_event

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
IDENTITY = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
}
TRAIN = f"{sys.executable} train.py"


def git(cwd: Path, *args: str) -> str:
    env = {**os.environ, **IDENTITY}
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, check=True, text=True
    ).stdout.strip()


def project(path: Path) -> Path:
    """A git workdir: train.py prints the learning rate of config.py and a note from an
    untracked file; config.py's committed value is 0.1, its uncommitted one 0.25."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    (path / "train.py").write_text(
        "import os\nfrom config import LR\nfrom note import NOTE\n"
        "print('lr', LR, NOTE, 'cwd', os.getcwd())\n"
    )
    (path / "config.py").write_text("LR = 0.1\n")
    (path / "note.py").write_text("NOTE = 'committed'\n")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "first")
    (path / "config.py").write_text("LR = 0.25\n")
    (path / "note.py").unlink()
    (path / "note.py").write_text("NOTE = 'uncommitted <b>'\n")
    return path


@pytest.fixture
def laptop(agentsys_config, settings, tmp_path):
    """The web process runs on host "laptop", whose disk holds the workdir."""
    settings.AGENTSYS_WORKDIR = tmp_path
    agentsys_config(host_name="laptop")
    return tmp_path


@pytest.fixture
def gpu_b(tmp_path):
    """A runagentd on another host: its own AGENTSYS_WORKDIR and data folder, no shared disk
    (the test moves the run's workdir away before it starts)."""
    started = []

    def start() -> DaemonProcess:
        (tmp_path / "gpu-b-work").mkdir(exist_ok=True)
        daemon = DaemonProcess(
            "gpu-b",
            AGENTSYS_GPUS="1",
            AGENTSYS_WORKDIR=str(tmp_path / "gpu-b-work"),
            AGENTSYS_HOME=str(tmp_path / "gpu-b-home"),
        )
        started.append(daemon)
        return daemon

    yield start
    for daemon in started:
        daemon.stop()


def ended(run_id: str, timeout: float = 20) -> Run:
    return wait_until(
        lambda: Run.objects.filter(pk=run_id, status__in=["done", "failed", "lost"]).first(),
        timeout,
        message=f"{run_id} to end",
    )


def log_of(run: Run) -> str:
    return (Path(run.run_dir) / "run.log").read_text()


def test_a_run_made_on_the_laptop_runs_its_committed_and_patched_code_on_another_host(
    api, laptop, gpu_b, tmp_path
):
    work = project(tmp_path / "laptop-disk" / "project")
    commit = git(work, "rev-parse", "HEAD")
    created = api("post", "/api/runs", {"name": "lr", "command": TRAIN, "workdir": str(work)})
    assert created.status_code == 201, created.json()
    code = created.json()["code"]
    assert (code["commit"], code["host"], code["has_patch"]) == (commit, "laptop", True)
    assert CodeBundle.objects.filter(commit=commit).exists()
    # The laptop's disk is not the GPU host's: the workdir is gone before any host claims it.
    os.rename(tmp_path / "laptop-disk", tmp_path / "laptop-disk-elsewhere")

    assert api("post", f"/api/runs/{created.json()['id']}/start").status_code == 200
    gpu_b()
    run = ended(created.json()["id"])

    checkout = tmp_path / "gpu-b-work" / ".agents" / "checkouts" / run.agent_id
    assert (run.status, run.error) == ("done", "")
    assert run.code_dir == str(checkout)
    assert run.run_dir == str(checkout / ".agents" / "runs" / run.agent_id)
    assert f"lr 0.25 uncommitted <b> cwd {checkout}" in log_of(run)
    assert git(checkout, "rev-parse", "HEAD") == commit  # the commit, the patch on top
    shown = api("get", f"/api/runs/{run.id}").json()["code"]
    assert shown["dir"] == str(checkout) and shown["patch_digest"] == run.code_patch_digest
    patch = api("get", f"/api/runs/{run.id}/patch")
    assert patch["Content-Type"].startswith("text/x-diff")
    assert b"+LR = 0.25" in patch.content and b"+NOTE = 'uncommitted <b>'" in patch.content


def test_a_script_names_the_commit_and_a_remote_and_the_host_fetches_it_from_there(
    api, laptop, gpu_b, tmp_path
):
    work = project(tmp_path / "scripts-machine" / "project")
    remote = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(work), str(remote))
    commit = git(work, "rev-parse", "HEAD")
    patch = git(work, "diff", "HEAD") + "\n"
    body = {
        "name": "from a script",
        "command": TRAIN,
        "workdir": "/home/someone/project",  # on the script's machine, not the server's
        "auto_start": True,
        "code": {"commit": commit, "remote": str(remote), "patch": patch},
    }
    created = api("post", "/api/runs", body)
    assert created.status_code == 201, created.json()
    assert created.json()["code"]["remote"] == str(remote)
    assert not CodeBundle.objects.exists()  # the remote serves it: nothing packed
    assert CodePatch.objects.get().files == 2

    gpu_b()
    run = ended(created.json()["id"])
    assert (run.status, run.error) == ("done", "")
    assert "lr 0.25 uncommitted <b>" in log_of(run)
    assert run.code_dir.startswith(str(tmp_path / "gpu-b-work" / ".agents" / "checkouts"))


@pytest.mark.parametrize(
    ("code", "said"),
    [
        ({"commit": "abc"}, "is not a full git commit id"),
        ({"commit": "a" * 40, "remote": "ext::sh -c id"}, "is not a git URL"),
        ({"commit": "a" * 40}, "code.remote: needed, since no bundle of aaaaaaaaaaaa"),
        ({"commit": "a" * 40, "remote": "/r.git", "extra": 1}, "extra"),
    ],
)
def test_code_a_host_could_never_check_out_is_422_saying_why(api, laptop, code, said):
    body = {"name": "x", "command": "true", "workdir": "/elsewhere", "code": code}
    response = api("post", "/api/runs", body)
    assert response.status_code == 422 and said in response.json()["detail"]
    assert not Run.objects.exists()


def test_a_workdir_with_no_commit_missing_on_the_host_fails_saying_what_to_do(
    api, laptop, gpu_b, tmp_path
):
    plain = tmp_path / "laptop-disk" / "plain"
    plain.mkdir(parents=True)
    created = api("post", "/api/runs", {"name": "x", "command": "true", "workdir": str(plain)})
    assert created.json()["code"] == {
        "commit": "",
        "remote": "",
        "patch_digest": "",
        "has_patch": False,
        "host": "laptop",
        "dir": "",
        "error": "",
    }
    os.rename(tmp_path / "laptop-disk", tmp_path / "gone")
    api("post", f"/api/runs/{created.json()['id']}/start")
    gpu_b()
    run = ended(created.json()["id"])
    assert run.status == "failed"
    assert (
        f"workdir {plain} is not on host gpu-b and the run recorded no git commit to check "
        "out; make the workdir a git repository or name code.remote"
    ) in run.error


def test_a_run_made_where_its_workdir_is_runs_in_place(api, agentsys_config, gpu_b, tmp_path):
    """The daemon's own host made it (a research loop's experiment, a run from the same
    machine): no checkout, the workdir as it is now."""
    agentsys_config(host_name="gpu-b")
    work = project(tmp_path / "project")
    body = {"name": "here", "command": TRAIN, "workdir": str(work), "auto_start": True}
    created = api("post", "/api/runs", body)
    gpu_b()
    run = ended(created.json()["id"])
    assert (run.status, run.code_dir) == ("done", "")
    assert f"lr 0.25 uncommitted <b> cwd {work}" in log_of(run)


def test_the_run_page_shows_the_commit_the_patch_and_where_it_ran(admin_client, laptop, tmp_path):
    from scheduler_app.runs import launch as runs

    work = project(tmp_path / "project")
    run = runs.create_run(name="page", command=TRAIN, workdir=str(work))
    Run.objects.filter(pk=run.pk).update(code_dir="/srv/gpu-b/.agents/checkouts/x")

    page = admin_client.get(f"/runs/{run.pk}/").content.decode()

    commit = git(work, "rev-parse", "HEAD")
    assert f'<span title="{commit}">{commit[:12]}</span>' in page
    assert "uncommitted changes: 2 files" in page
    assert "+NOTE = &#x27;uncommitted &lt;b&gt;&#x27;" in page  # the patch, escaped
    assert "/srv/gpu-b/.agents/checkouts/x" in page
    admin = admin_client.get(f"/admin/scheduler_app/run/{run.pk}/change/")
    assert admin.status_code == 200 and commit in admin.content.decode()  # shown, not editable


def test_a_restarted_runagentd_re_adopts_the_run_in_its_checkout_without_making_it_again(
    api, laptop, gpu_b, tmp_path
):
    work = project(tmp_path / "laptop-disk" / "project")
    release = tmp_path / "release"
    command = f"while [ ! -e {release} ]; do sleep 0.1; done; {TRAIN}"
    body = {"name": "long", "command": command, "workdir": str(work), "auto_start": True}
    created = api("post", "/api/runs", body).json()
    os.rename(tmp_path / "laptop-disk", tmp_path / "laptop-disk-elsewhere")
    daemon = gpu_b()
    wait_event(created["agent_id"], "run_started")
    run = Run.objects.get(pk=created["id"])
    checkout = Path(run.code_dir)
    (checkout / "config.py").write_text("LR = 'touched by the running job'\n")

    daemon.stop(signal.SIGKILL)
    gpu_b()
    wait_event(run.agent_id, "run_adopted")
    release.touch()
    run = ended(run.id)

    assert (run.status, run.code_dir) == ("done", str(checkout))
    assert "lr touched by the running job" in log_of(run)  # the same checkout, not a new one
    assert len(events(run.agent_id, "code_checked_out")) == 1


def test_each_new_commit_of_a_repository_stores_only_what_came_since(laptop, tmp_path):
    from scheduler_app.runs import launch as runs

    work = project(tmp_path / "project")
    (work / "data.bin").write_bytes(os.urandom(300_000))
    git(work, "add", "-A")
    git(work, "commit", "-qm", "data")
    first = runs.create_run(name="1", command="true", workdir=str(work))
    runs.create_run(name="again", command="true", workdir=str(work))  # same commit: no bundle
    (work / "config.py").write_text("LR = 0.5\n")
    git(work, "commit", "-qam", "iteration")
    second = runs.create_run(name="2", command="true", workdir=str(work))

    bundles = {b.commit: b for b in CodeBundle.objects.all()}
    assert set(bundles) == {first.code_commit, second.code_commit}
    assert bundles[second.code_commit].base == first.code_commit
    assert bundles[second.code_commit].size < bundles[first.code_commit].size / 50


def test_a_research_loops_experiment_records_the_code_on_the_loops_host(tmp_path):
    """Its runagentd sees the loop's workdir: the experiment's run names that host and the
    commit and changes the iteration left."""
    from agents_app.services import create_agent
    from agentsys.agent import Scope
    from agentsys.store import AgentRecord
    from agentsys.types import AgentStatus
    from hosts_app.models import Host
    from runtime_app.runtime_store import DjangoRuntimeStore

    work = project(tmp_path / "loop-workdir")
    host = Host.objects.create(name="brain")
    loop = create_agent(
        role="research", cls_path="x.Loop", goal="g", config={}, project="p", host_id=host.id
    )
    record = AgentRecord(
        id="executor-exp1",
        role="executor",
        cls_path="agentsys.agents.executor.ExecutorAgent",
        parent_id=loop.id,
        goal="lr 0.25",
        config={"command": TRAIN, "workdir": str(work), "experiment": {"iteration": 1}},
        scope=Scope(project="p"),
        status=AgentStatus.IDLE,
    )
    DjangoRuntimeStore().create_queued_agent(record=record, gpu_required=0)

    run = Run.objects.get(agent_id="executor-exp1")
    assert (run.code_commit, run.code_host) == (git(work, "rev-parse", "HEAD"), "brain")
    assert b"+LR = 0.25" in CodePatch.objects.get(pk=run.code_patch_digest).data
    assert CodeBundle.objects.filter(commit=run.code_commit).exists()
