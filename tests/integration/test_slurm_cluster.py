"""The SLURM client against a real single-node SLURM (scripts/slurm_up.sh: slurmctld, slurmd,
munge, 2 GPUs as device nodes without a driver). No database: these tests only talk to SLURM.

Skipped (with the reason) only where the cluster cannot be made: not root, or no apt-get.
Anywhere else a cluster that does not come up is a failure."""

from __future__ import annotations

import subprocess
import time

import pytest

from agentsys.slurm import client as slurm
from agentsys.slurm.client import SlurmError
from tests.helpers import pid_alive, wait_until
from tests.slurm_cluster import bring_up_slurm

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster():
    bring_up_slurm()


@pytest.fixture
def jobs(cluster, tmp_path):
    """submit(name, body, gpus=0) -> (job id, output file); any job left is cancelled after."""
    submitted = []

    def submit(name, body, gpus=0):
        script = tmp_path / f"{name}.sh"
        script.write_text(f"#!/bin/sh\n{body}\n")
        output = tmp_path / f"{name}.out"
        spec = slurm.SlurmJobSpec(
            script, job_name=f"agentsys-test-{name}", gpus=gpus, workdir=tmp_path, output=output
        )
        job_id = slurm.submit(spec)
        submitted.append(job_id)
        return job_id, output

    yield submit
    for job_id in submitted:
        slurm.cancel(job_id)


def _state(job_id):
    return slurm.job_states([job_id]).get(job_id)


def _wait_state(job_id, *words, timeout=20.0):
    def reached():
        state = _state(job_id)
        return state if state and state.state in words else None

    return wait_until(reached, timeout, interval=0.2, message=f"job {job_id} to be {words}")


def _gpu_job(release) -> str:
    """A job script that says which GPUs SLURM gave it, then holds them until the test
    creates `release` (a minute at most): "two run while one waits" then lasts as long as the
    test looks, however slowly a busy machine lets SLURM start them."""
    return (
        'echo "gpus=$CUDA_VISIBLE_DEVICES job_gpus=$SLURM_JOB_GPUS"\n'
        f"for _ in $(seq 600); do [ -e {release} ] && exit 0; sleep 0.1; done\nexit 1"
    )


def test_a_job_completes_with_its_output_and_exit_code_0(jobs, tmp_path):
    job_id, output = jobs("ok", 'echo "hello from $SLURM_JOB_ID in $(pwd)"\nsleep 1')
    state = _wait_state(job_id, "COMPLETED", "FAILED", "CANCELLED")
    assert (state.state, state.exit_code) == ("COMPLETED", 0)
    assert output.read_text() == f"hello from {job_id} in {tmp_path}\n"


def test_a_failing_script_is_failed_with_its_exit_code(jobs):
    job_id, output = jobs("fails", "echo about to fail >&2\nexit 3")
    state = _wait_state(job_id, "COMPLETED", "FAILED", "CANCELLED")
    assert (state.state, state.exit_code) == ("FAILED", 3)
    assert output.read_text() == "about to fail\n"  # stderr in the same file


def test_three_one_gpu_jobs_on_two_gpus(jobs, tmp_path):
    release = {n: tmp_path / f"release-{n}" for n in "abc"}
    (first, out1), (second, out2), (third, out3) = (
        jobs(n, _gpu_job(release[n]), gpus=1) for n in "abc"
    )

    def two_run_one_waits():
        states = slurm.job_states([first, second, third])
        if [states[j].state for j in (first, second)] != ["RUNNING", "RUNNING"]:
            return None
        # Briefly "Priority" right after submission, then "Resources".
        waiting = states[third]
        return waiting if waiting.reason == "Resources" else None

    waiting = wait_until(two_run_one_waits, 30, interval=0.2, message="2 running, 1 waiting")
    assert waiting.state == "PENDING"
    assert not out3.exists()  # it has not started

    def gpus_seen(output):
        return wait_until(lambda: output.exists() and output.read_text(), 15, message=str(output))

    seen = {gpus_seen(out1).strip(), gpus_seen(out2).strip()}
    assert seen == {"gpus=0 job_gpus=0", "gpus=1 job_gpus=1"}
    assert _state(third).state == "PENDING"  # still: both GPUs are held

    # The third starts once one of the first two has ended, on the GPU that one freed.
    release["a"].touch()
    assert _wait_state(first, "COMPLETED", "FAILED").exit_code == 0
    _wait_state(third, "RUNNING", "COMPLETED")
    assert _state(second).state == "RUNNING"
    assert gpus_seen(out3).strip() == gpus_seen(out1).strip()
    release["b"].touch()
    release["c"].touch()
    assert _wait_state(third, "COMPLETED", "FAILED").exit_code == 0


def test_suspend_resume_and_cancel_of_a_running_and_a_pending_job(jobs, tmp_path):
    # Both GPUs for the first, so the second has to wait.
    body = f"echo $$ > {tmp_path}/shell.pid\nsleep 60 &\necho $! > {tmp_path}/sleep.pid\nwait"
    running, _ = jobs("holds-both", body, gpus=2)
    pending, pending_out = jobs("waits", "echo should never run", gpus=1)
    _wait_state(running, "RUNNING")
    pids = wait_until(
        lambda: (
            [int((tmp_path / f).read_text()) for f in ("shell.pid", "sleep.pid")]
            if (tmp_path / "sleep.pid").exists() and (tmp_path / "sleep.pid").read_text()
            else None
        ),
        5,
        message="the job's pids",
    )
    assert all(pid_alive(pid) for pid in pids)
    assert _state(pending).state == "PENDING"

    slurm.suspend(running)
    assert _state(running).state == "SUSPENDED"
    slurm.resume(running)
    assert _state(running).state == "RUNNING"

    slurm.cancel(pending)
    assert _wait_state(pending, "CANCELLED").state == "CANCELLED"
    slurm.cancel(running)
    assert _wait_state(running, "CANCELLED").state == "CANCELLED"
    wait_until(
        lambda: not any(pid_alive(pid) for pid in pids), 10, message="the job's processes to end"
    )
    assert not pending_out.exists()
    slurm.cancel(running)  # cancelling again: the job has ended, nothing to do


def test_more_gpus_than_the_node_has_are_refused_at_submit(jobs):
    with pytest.raises(SlurmError) as caught:
        jobs("too-big", "true", gpus=3)
    assert str(caught.value) == (
        "sbatch refused the job: Batch job submission failed: "
        "Requested node configuration is not available"
    )


def test_job_states_is_one_squeue_and_one_sacct_call_for_many_jobs(jobs, monkeypatch):
    done = [jobs(f"quick{n}", "true")[0] for n in range(3)]
    live = [jobs(f"slow{n}", "sleep 20")[0] for n in range(2)]
    for job_id in done:
        _wait_state(job_id, "COMPLETED")
    unknown = max(done + live) + 10_000

    calls = []
    real_run = subprocess.run

    def counting(argv, **kwargs):
        calls.append(argv[0])
        return real_run(argv, **kwargs)

    monkeypatch.setattr(subprocess, "run", counting)
    started = time.monotonic()
    states = slurm.job_states([*done, *live, unknown])
    elapsed = time.monotonic() - started
    assert calls == ["squeue", "sacct"]
    assert {job_id: states[job_id].state for job_id in done} == dict.fromkeys(done, "COMPLETED")
    assert {states[job_id].state for job_id in live} <= {"RUNNING", "PENDING"}
    assert unknown not in states
    assert elapsed < 2, elapsed

    calls.clear()
    slurm.job_states(live)  # all still listed by squeue: no sacct at all
    assert calls == ["squeue"]
