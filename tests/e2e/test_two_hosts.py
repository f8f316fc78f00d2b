"""Issue 24 end to end: a researcher's laptop runs the web, two GPU servers run runagentd, and
they share nothing but PostgreSQL. Each host has a working directory (and AGENTSYS_HOME) of
its own; the laptop's workdir is moved away before any host claims a run, so no run can read
it. The web serves each run's log (live, in order) and metrics from the database, and each
run's output proves it ran the laptop's commit plus its uncommitted change."""

import json
import subprocess
import sys
import time

import httpx
import pytest

from agents_app.models import Agent
from tests.helpers import wait_until
from tests.live_clients import TOKEN, Web
from tests.runtime_harness import DaemonProcess

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
STEPS = 25

TRAIN = f"""\
import json, os, time
from pathlib import Path

config = json.loads(Path("config.json").read_text())
print(f"lr={{config['lr']}} cwd={{os.getcwd()}}", flush=True)
metrics = Path(os.environ["AGENTSYS_RUN_DIR"]) / "agent_metrics.jsonl"
for step in range({STEPS}):
    loss = config["lr"] / (step + 1)
    print(f"step {{step}} loss {{loss:.5f}}", flush=True)
    with metrics.open("a") as out:
        out.write(json.dumps({{"_step": step, "loss": loss}}) + "\\n")
    time.sleep(0.12)
print("trained", flush=True)
"""


def _git(repo, *args) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


@pytest.fixture
def laptop(tmp_path):
    """The researcher's repository: train.py and config.json committed (lr 0.1), then the
    config changed to lr 0.5 and not committed."""
    repo = tmp_path / "laptop" / "project"
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    (repo / "train.py").write_text(TRAIN)
    (repo / "config.json").write_text(json.dumps({"lr": 0.1}))
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=ada", "-c", "user.email=ada@lab", "commit", "-qm", "first")
    (repo / "config.json").write_text(json.dumps({"lr": 0.5}))
    return repo


@pytest.fixture
def site(tmp_path, laptop):
    web = Web(AGENTSYS_HOST_NAME="laptop", AGENTSYS_WORKDIR=str(laptop))
    for name in ("gpu-a", "gpu-b"):
        (tmp_path / name / "work").mkdir(parents=True)
    daemons = [
        DaemonProcess(
            name,
            AGENTSYS_GPUS=gpus,
            AGENTSYS_HOST_LABELS=f"site={name}",
            AGENTSYS_WORKDIR=str(tmp_path / name / "work"),
            AGENTSYS_HOME=str(tmp_path / name / "home"),
        )
        for name, gpus in (("gpu-a", "1"), ("gpu-b", "2"))
    ]
    client = httpx.Client(base_url=web.url, headers={"X-Auth-Token": TOKEN}, timeout=10)
    yield client
    client.close()
    for daemon in daemons:
        daemon.stop()
    web.stop()


def _make(client, laptop, name: str, site_name: str) -> dict:
    response = client.post(
        "/api/runs",
        json={
            "name": name,
            "command": f"{sys.executable} train.py",
            "workdir": str(laptop),
            "gpu_required": 1,
            "requires": {"site": site_name},
        },
    )
    assert response.status_code == 201, response.text
    return response.json()


def _follow_log(client, run_id: str) -> tuple[str, int]:
    """The log as a script reads it through the web, polling from its last byte until the
    run ends; returns it and how many reads brought text while the run still ran."""
    text, offset, live_reads = "", 0, 0
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        status = client.get(f"/api/runs/{run_id}").json()["status"]
        chunk = client.get(f"/api/runs/{run_id}/logs", params={"offset": offset}).json()
        assert chunk["offset"] == offset  # served from where the last read ended: in order
        text += chunk["text"]
        offset = chunk["next_offset"]
        if chunk["text"] and status == "running":
            live_reads += 1
        # Its executor ships the whole log before the run is marked ended.
        if status in ("done", "failed", "lost", "stopped") and offset >= chunk["size"]:
            return text, live_reads
        time.sleep(0.1)
    raise AssertionError(f"{run_id} did not end in 60 s; its log so far: {text[-500:]}")


def test_runs_on_two_hosts_that_share_only_postgres(site, laptop, tmp_path):
    client = site
    head = _git(laptop, "rev-parse", "HEAD")
    on_b = _make(client, laptop, "on gpu-b", "gpu-b")
    on_a = _make(client, laptop, "on gpu-a", "gpu-a")
    for made in (on_a, on_b):  # recorded by the web, which sees the workdir
        assert made["code"]["commit"] == head and made["code"]["has_patch"]
        assert made["code"]["host"] == "laptop"
    assert "lr" in client.get(f"/api/runs/{on_b['id']}/patch").text
    away = laptop.rename(tmp_path / "laptop" / "moved-away")  # no host can read it now
    for made in (on_b, on_a):
        assert client.post(f"/api/runs/{made['id']}/start").status_code == 200

    log, live_reads = _follow_log(client, on_b["id"])
    run = client.get(f"/api/runs/{on_b['id']}").json()
    assert run["status"] == "done", run["error"]
    assert live_reads >= 3  # lines reached the web while the run ran on gpu-b
    lines = [line for line in log.splitlines() if line.startswith("step ")]
    assert lines == [f"step {s} loss {0.5 / (s + 1):.5f}" for s in range(STEPS)]  # all, in order
    # The laptop's uncommitted lr=0.5 ran, in gpu-b's own checkout of the commit.
    checkout = tmp_path / "gpu-b" / "work" / ".agents" / "checkouts"
    assert log.startswith(f"lr=0.5 cwd={checkout}")
    assert run["code"]["dir"].startswith(str(checkout))
    assert str(away) not in log and str(laptop) not in log
    assert Agent.objects.get(pk=run["agent_id"]).host.name == "gpu-b"
    # The web reads what gpu-b shipped, not gpu-b's disk: the log is the file, byte for byte.
    shipped = client.get(f"/api/runs/{on_b['id']}/logs", params={"limit": 65536}).json()
    assert shipped["host"] == "gpu-b" and not shipped["capped"]
    run_log = (tmp_path / "gpu-b" / "work").rglob(f"runs/{run['agent_id']}/run.log")
    assert shipped["text"] == next(run_log).read_text()
    metrics = client.get(f"/api/runs/{on_b['id']}/metrics", params={"keys": "loss"}).json()
    (loss,) = metrics["series"]
    assert loss["steps"] == list(range(STEPS)) and loss["points"] == STEPS

    wait_until(lambda: client.get(f"/api/runs/{on_a['id']}").json()["status"] == "done", 60)
    other = client.get(f"/api/runs/{on_a['id']}/logs").json()
    assert other["host"] == "gpu-a"
    assert other["text"].startswith(f"lr=0.5 cwd={tmp_path / 'gpu-a' / 'work'}")
