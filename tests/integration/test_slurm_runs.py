"""Issue 22's must-show against the real SLURM (tests/slurm_cluster.py): runs with
backend "slurm" go through the queue, a real runagentd (AGENTSYS_SLURM=on) submits them with
sbatch, follows them with one batched squeue/sacct per tick, stops, cancels and re-adopts
them. SLURM places the GPUs (2 on the test node); AgentSys books none."""

from __future__ import annotations

import json
import signal

import pytest

from agentsys.run_dir import run_dir_of
from agentsys.slurm import client as slurm
from hosts_app.models import Host
from scheduler_app.models import GPU, MetricSeries, Run, RunStatus
from tests.helpers import pid_alive, run_ended, wait_until
from tests.runtime_harness import DaemonProcess
from tests.slurm_cluster import bring_up_slurm

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

HOST = "slurm-login"


@pytest.fixture(scope="module")
def cluster():
    bring_up_slurm()


@pytest.fixture
def daemons(cluster):
    """start(name, slurm="on") -> a runagentd; each is stopped after, and any job left
    cancelled."""
    started = []

    def start(name=HOST, slurm_mode="on"):
        started.append(DaemonProcess(name, AGENTSYS_SLURM=slurm_mode, AGENTSYS_GPUS=""))
        return started[-1]

    yield start
    for process in started:
        if process.process.poll() is None:
            process.stop()
    _cancel_jobs_left()


@pytest.fixture
def daemon(daemons):
    return daemons()


def _cancel_jobs_left():
    for job_id in Run.objects.exclude(slurm_job_id=None).values_list("slurm_job_id", flat=True):
        slurm.cancel(job_id)


def _post_run(api, tmp_path, command, *, gpus=0, name="run", **extra):
    body = {
        "name": name,
        "command": command,
        "workdir": str(tmp_path),
        "gpu_required": gpus,
        "backend": "slurm",
        "auto_start": True,
        **extra,
    }
    response = api("post", "/api/runs", body)
    assert response.status_code == 201, response.content
    return Run.objects.get(pk=response.json()["id"])


def _api_run(api, run) -> dict:
    response = api("get", f"/api/runs/{run.pk}")
    assert response.status_code == 200
    return response.json()


def _log(run) -> str:
    path = run_dir_of(run.workdir, run.agent_id) / "run.log"
    return path.read_text() if path.exists() else ""


def _running(run, timeout=30):
    return wait_until(
        lambda: Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING).first(),
        timeout,
        message=f"{run.pk} to run on SLURM",
    )


METRICS_SCRIPT = (
    "import json, os\n"
    "with open(os.path.join(os.environ['AGENTSYS_RUN_DIR'], 'agent_metrics.jsonl'), 'a') as f:\n"
    "    for step in range(1, 6):\n"
    "        f.write(json.dumps({'step': step, 'loss': 1.0 / step}) + '\\n')\n"
    "print('trained on', os.environ.get('SLURM_JOB_ID'))\n"
)


def test_a_run_ends_done_with_its_log_and_metrics_and_a_failing_one_with_its_code(
    daemon, api, tmp_path
):
    (tmp_path / "train.py").write_text(METRICS_SCRIPT)
    good = _post_run(api, tmp_path, "python3 train.py", name="good")
    bad = _post_run(api, tmp_path, "echo about to fail >&2; exit 3", name="bad")
    good, bad = run_ended(good, timeout=60), run_ended(bad, timeout=60)

    assert (good.status, good.exit_code, good.error) == (RunStatus.DONE, 0, "")
    assert good.slurm_job_id and f"trained on {good.slurm_job_id}" in _log(good)
    loss = MetricSeries.objects.get(run=good, key="loss")
    assert (loss.points, loss.source) == (5, "jsonl")
    assert _api_run(api, good)["slurm_job_id"] == good.slurm_job_id

    assert (bad.status, bad.exit_code) == (RunStatus.FAILED, 3)
    assert "exited with code 3" in bad.error
    assert _log(bad) == "about to fail\n"
    # SLURM's own record agrees, and no GPU of AgentSys's was ever booked for them.
    assert slurm.job_states([bad.slurm_job_id])[bad.slurm_job_id].exit_code == 3
    assert not GPU.objects.exists()


def _gpu_command(go):
    # Each job holds its GPU until the test says go: a fixed sleep gave the test a window of
    # a few seconds to see two running and one waiting, which a slow machine missed (CI).
    return (
        'echo "gpus=$CUDA_VISIBLE_DEVICES job_gpus=$SLURM_JOB_GPUS"; '
        f"while [ ! -e {go} ]; do sleep 0.1; done"
    )


def test_three_one_gpu_runs_on_two_gpus_the_third_waits_with_slurms_reason(daemon, api, tmp_path):
    go = tmp_path / "go"
    runs = [_post_run(api, tmp_path, _gpu_command(go), gpus=1, name=f"g{i}") for i in range(3)]

    def two_running_one_waiting_for_resources():
        rows = [_api_run(api, run) for run in runs]
        statuses = sorted(row["status"] for row in rows)
        waiting = [row for row in rows if row["status"] == "queued"]
        if statuses == ["queued", "running", "running"] and waiting[0]["wait_reason"]:
            return waiting[0] if waiting[0]["wait_reason"] == "Resources" else None
        return None

    waiting = wait_until(two_running_one_waiting_for_resources, 60, message="2 running, 1 queued")
    assert waiting["slurm_job_id"]
    go.touch()
    # The third runs once one of the first two is done; all three end done.
    ended = [run_ended(run, timeout=60) for run in runs]
    assert [run.status for run in ended] == [RunStatus.DONE] * 3
    seen = [_log(run).strip() for run in sorted(ended, key=lambda run: run.started_at)]
    assert set(seen) <= {"gpus=0 job_gpus=0", "gpus=1 job_gpus=1"}
    assert len(set(seen[:2])) == 2  # the two that ran together had distinct GPUs
    waited = Run.objects.get(pk=waiting["id"])
    assert waited.wait_reason == "" and waited.started_at > min(r.started_at for r in ended)


def _pids_of(tmp_path, name):
    path = tmp_path / name
    return wait_until(
        lambda: [int(p) for p in path.read_text().split()] if path.exists() else None,
        30,
        message=f"{name} to be written",
    )


def test_stop_cancels_a_running_job_with_no_process_left_and_a_pending_one_is_cancelled(
    daemon, api, tmp_path
):
    holder = _post_run(
        api,
        tmp_path,
        f"sleep 300 & echo $$ $! > {tmp_path}/pids; wait",
        gpus=2,
        name="holds-both",
    )
    _running(holder)
    pending = _post_run(api, tmp_path, "echo should never run", gpus=1, name="waits")
    pids = _pids_of(tmp_path, "pids")
    assert all(pid_alive(pid) for pid in pids)
    wait_until(
        lambda: Run.objects.get(pk=pending.pk).wait_reason == "Resources",
        30,
        message="the second run to wait for resources",
    )

    assert api("post", f"/api/runs/{pending.pk}/stop").status_code == 200
    pending = run_ended(pending, timeout=30)
    assert pending.status == RunStatus.CANCELLED
    assert slurm.job_states([pending.slurm_job_id])[pending.slurm_job_id].state == "CANCELLED"
    assert _log(pending) == ""

    assert api("post", f"/api/runs/{holder.pk}/stop").status_code == 200
    holder = run_ended(holder, timeout=60)
    assert holder.status == RunStatus.STOPPED
    # Reported stopped only once SLURM ended the job: none of its processes is left.
    assert not any(pid_alive(pid) for pid in pids)
    assert slurm.job_states([holder.slurm_job_id])[holder.slurm_job_id].finished


def test_pause_suspends_the_job_and_resume_lets_it_finish(daemon, api, tmp_path):
    run = _post_run(api, tmp_path, "for i in 1 2 3 4 5 6; do echo tick $i; sleep 1; done")
    _running(run)
    wait_until(lambda: "tick 1" in _log(run), 30, message="the first tick")
    assert api("post", f"/api/agents/{run.agent_id}/pause").status_code in (200, 202)
    wait_until(lambda: Run.objects.get(pk=run.pk).status == RunStatus.PAUSED, 20, message="paused")
    job = Run.objects.get(pk=run.pk).slurm_job_id
    assert slurm.job_states([job])[job].state == "SUSPENDED"
    assert api("post", f"/api/agents/{run.agent_id}/resume").status_code in (200, 202)
    run = run_ended(run, timeout=60)
    assert (run.status, run.exit_code) == (RunStatus.DONE, 0)
    assert "tick 6" in _log(run)


def test_a_pending_job_cannot_be_paused_and_says_why(daemon, api, tmp_path):
    holder = _post_run(api, tmp_path, "sleep 300", gpus=2, name="holds-both")
    _running(holder)
    waiting = _post_run(api, tmp_path, "sleep 1", gpus=2, name="waits")
    wait_until(
        lambda: Run.objects.get(pk=waiting.pk).wait_reason == "Resources", 30, message="waiting"
    )
    api("post", f"/api/agents/{waiting.agent_id}/pause")
    event = wait_until(
        lambda: _event(waiting.agent_id, "pause_refused"), 20, message="the pause refused"
    )
    assert "nothing runs to suspend" in json.dumps(event)
    assert Run.objects.get(pk=waiting.pk).status == RunStatus.QUEUED


def _event(agent_id, kind):
    from events_app.models import Event

    return Event.objects.filter(agent_id=agent_id, kind=kind).values("payload").first()


def test_runagentd_killed_re_attaches_by_job_id_and_records_jobs_that_ended_meanwhile(
    daemons, api, tmp_path
):
    daemon = daemons()
    long = _post_run(api, tmp_path, "sleep 8; echo long done", name="long")
    short = _post_run(api, tmp_path, "sleep 2; exit 7", name="short")
    _running(long)
    _running(short)
    daemon.stop(signal.SIGKILL)
    # The short job ends while no runagentd runs; the long one goes on under SLURM.
    short_job = Run.objects.get(pk=short.pk).slurm_job_id
    wait_until(
        lambda: slurm.job_states([short_job])[short_job].finished, 30, message="the short job"
    )
    assert Run.objects.get(pk=long.pk).status == RunStatus.RUNNING

    daemons()
    long, short = run_ended(long, timeout=60), run_ended(short, timeout=60)
    assert (short.status, short.exit_code) == (RunStatus.FAILED, 7)
    assert (long.status, long.exit_code) == (RunStatus.DONE, 0)
    assert _log(long).strip().endswith("long done")
    assert Run.objects.filter(slurm_job_id=long.slurm_job_id).count() == 1  # not resubmitted


def test_more_gpus_than_any_node_has_is_rejected_in_slurms_words(daemon, api, tmp_path):
    run = run_ended(_post_run(api, tmp_path, "echo never", gpus=3), timeout=30)
    assert run.status == RunStatus.REJECTED
    assert "sbatch refused the job" in run.error
    assert "Requested node configuration is not available" in run.error


def test_without_a_slurm_host_a_slurm_run_is_rejected_saying_why(api, tmp_path, daemons):
    daemons("no-slurm-here", slurm_mode="off")
    assert not Host.objects.filter(info__slurm=True).exists()
    run = _post_run(api, tmp_path, "echo never")
    assert run.status == RunStatus.REJECTED
    assert run.error.startswith("No host runs SLURM")


DIVERGES = (
    "import json, os, time\n"
    "with open(os.path.join(os.environ['AGENTSYS_RUN_DIR'], 'agent_metrics.jsonl'), 'a') as f:\n"
    "    for step in range(600):\n"
    "        f.write(json.dumps({'step': step, 'loss': 0.5 if step < 20 else 9.5}) + '\\n')\n"
    "        f.flush()\n"
    "        time.sleep(0.05)\n"
)


def test_a_stop_rule_ends_its_slurm_job_saying_why(daemon, api, tmp_path):
    # Issue 39 §1: the executor reads the job's metrics on the login host and stops it as a
    # person's stop does, through SLURM.
    (tmp_path / "train.py").write_text(DIVERGES)
    rule = {"metric": "loss", "above": 2, "after_step": 10}
    run = _post_run(api, tmp_path, "python3 train.py", stop_when=[rule])
    run = run_ended(run, timeout=60)

    assert run.status == RunStatus.STOPPED, run.error
    assert run.stopped_by == "loss > 2 after step 10: 9.5 at step 20"
    assert _api_run(api, run)["stopped_by"] == run.stopped_by
    assert slurm.job_states([run.slurm_job_id])[run.slurm_job_id].finished
