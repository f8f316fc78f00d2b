"""ExecutorAgent on real processes: the run directory, the GPUs it was given, metrics and
alerts, GPU-conflict retries, and runs that survive a killed worker or runagentd."""

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from agents_app.models import Agent
from agents_app.services import request_agent_start
from agentsys.types import AgentStatus, RequestStatus
from events_app.models import Event
from memory_app.models import MemoryEntry
from scheduler_app.models import (
    GPU,
    Alert,
    MetricPoint,
    MetricSeries,
    Run,
    RunStatus,
    ScheduleRequest,
)
from scheduler_app.runs import launch as runs
from tests import runtime_agents
from tests.helpers import REPO, describe_process, launch_run, pid_alive, run_ended, wait_until
from tests.runtime_harness import DaemonProcess, events, wait_child, wait_event, wait_status

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
OOM_FIXTURE = REPO / "tests" / "fixtures" / "gpu-h100" / "oom.txt"
PY = sys.executable
EXECUTOR = "agentsys.agents.executor.ExecutorAgent"


@pytest.fixture
def daemons():
    started = []

    def start(name="exec-host", gpus="0,1", *args):
        started.append(DaemonProcess(name, *args, AGENTSYS_GPUS=gpus))
        return started[-1]

    yield start
    for daemon in started:
        if daemon.process.poll() is None:
            daemon.stop()


def test_run_dir_files_env_and_result(daemons, tmp_path):
    daemons()
    show_env = (
        f"{PY} -c \"import os,sys; print('CVD=' + os.environ['CUDA_VISIBLE_DEVICES']); "
        "print('WANDB', os.environ['WANDB_RUN_ID'], os.environ['WANDB_DIR']); "
        "print('ARGS', sys.argv[1:]); print('oops', file=sys.stderr)\""
    )
    run = run_ended(launch_run(tmp_path, show_env, gpu_required=1, params={"lr": 0.01}))
    assert (run.status, run.exit_code) == (RunStatus.DONE, 0)
    run_dir = Path(run.run_dir)
    assert run_dir == tmp_path / ".agents" / "runs" / run.agent_id
    log = (run_dir / "run.log").read_text()
    assert "CVD=0" in log  # the GPU index it was assigned, not a count
    assert f"WANDB {run.agent_id} {run_dir / 'wandb'}" in log
    assert "ARGS ['--lr=0.01']" in log and "oops" in log  # params appended; stderr too
    assert (run_dir / "command.txt").read_text().strip().endswith("--lr=0.01")
    assert (run_dir / "job.done").read_text().strip() == "0"
    result = MemoryEntry.objects.get(agent_id=run.agent_id, type="result")
    assert result.data == {
        "exit_code": 0,
        "run_dir": str(run_dir),
        "command": (run_dir / "command.txt").read_text().strip(),
    }
    request = ScheduleRequest.objects.get(agent_id=run.agent_id)
    assert (request.status, request.gpu_indices) == (RequestStatus.DONE, [0])
    assert not GPU.objects.filter(allocated_to__isnull=False).exists()  # released


def test_two_runs_get_different_gpus_and_a_third_waits(daemons, tmp_path):
    daemons()
    hold = (
        f"{PY} -c \"import os,time; print('CVD=' + os.environ['CUDA_VISIBLE_DEVICES']);"
        ' time.sleep(1.5)"'
    )
    first, second, third = (launch_run(tmp_path, hold, gpu_required=1) for _ in range(3))
    wait_until(lambda: Run.objects.filter(status=RunStatus.RUNNING).count() == 2, 20)
    assert Run.objects.get(pk=third.pk).status == RunStatus.QUEUED
    done = [run_ended(r) for r in (first, second, third)]
    indices = [(Path(r.run_dir) / "run.log").read_text().strip() for r in done]
    assert sorted(indices[:2]) == ["CVD=0", "CVD=1"]
    assert indices[2] in {"CVD=0", "CVD=1"}
    starts = [r.started_at for r in done]
    assert starts[2] >= min(d.finished_at for d in done[:2])  # waited for a free GPU


def test_notifications_wake_the_queue_not_the_fallback_poll(daemons, tmp_path):
    daemons("quick", "1", "--poll", "60")
    first = launch_run(tmp_path, "sleep 1", gpu_required=1)
    second = launch_run(tmp_path, "true", gpu_required=1)
    # A 60 s poll would miss both deadlines: the submit and the freed GPU each wake it.
    wait_until(lambda: Run.objects.get(pk=first.pk).status == RunStatus.RUNNING, 10)
    assert run_ended(second, timeout=15).status == RunStatus.DONE


def test_a_failing_command_fails_with_its_exit_code(daemons, tmp_path):
    daemons()
    run = run_ended(launch_run(tmp_path, "echo trying; exit 3"))
    assert (run.status, run.exit_code) == (RunStatus.FAILED, 3)
    assert "command exited with code 3" in run.error
    result = MemoryEntry.objects.get(agent_id=run.agent_id, type="result")
    assert result.data["exit_code"] == 3 and result.data["error"] == "command exited with code 3"
    assert Agent.objects.get(pk=run.agent_id).status == AgentStatus.FAILED


def _writes_losses(losses) -> str:
    rows = ";".join(
        f"print(json.dumps({{'_step': {i}, 'loss': {v}}}), file=f)" for i, v in enumerate(losses)
    )
    return (
        f"{PY} -c \"import json,os; f=open(os.environ['AGENTSYS_RUN_DIR'] + "
        f"'/agent_metrics.jsonl', 'a'); {rows}\""
    )


@pytest.mark.parametrize(
    ("losses", "severity", "message"),
    [
        ([1, 1, 1, 3.5], "warning", "Loss spike detected (loss=3.5000, rolling_avg=1.0000)."),
        ([1, "float('nan')"], "critical", "NaN loss detected (step=1)."),
        ([1, 9.0], "warning", "High loss detected (step=1, loss=9.0000, threshold=8.0)."),
    ],
)
def test_metrics_become_series_and_one_alert_a_person_sees(
    daemons, tmp_path, losses, severity, message
):
    daemons()
    run = run_ended(launch_run(tmp_path, _writes_losses(losses)))
    assert run.status == RunStatus.DONE, (run.error, Agent.objects.get(pk=run.agent_id).error)
    loss = MetricSeries.objects.filter(run=run, key="loss").first()
    assert loss is not None and loss.points == len(losses), (
        loss and loss.points,
        (Path(run.run_dir) / "agent_metrics.jsonl").read_text(),
        (Path(run.run_dir) / "run.log").read_text(),
    )
    result = MemoryEntry.objects.get(agent_id=run.agent_id, type="result")
    assert result.data["metrics"]["loss"]["points"] == len(losses)  # what agents read of it
    assert not MemoryEntry.objects.filter(agent_id=run.agent_id, type="metrics").exists()
    [alert] = Alert.objects.filter(agent_id=run.agent_id)
    assert (alert.severity, alert.message, alert.run_id) == (severity, message, run.id)
    assert MemoryEntry.objects.filter(agent_id=run.agent_id, type="alert").count() == 1
    assert (
        Event.objects.filter(stream="agents", kind="alert_raised", agent_id=run.agent_id).count()
        == 1
    )


def test_oom_fixture_is_retried_then_fails_at_the_limit(daemons, tmp_path):
    daemons()
    # The options go in with the run: an update after launch races the executor's start.
    run = launch_run(
        tmp_path,
        f"cat {OOM_FIXTURE}; exit 1",
        executor_options={"max_retries": 2, "retry_base_delay": 0.1},
    )
    run = run_ended(run)
    assert (run.status, run.exit_code) == (RunStatus.FAILED, 1)
    log = (Path(run.run_dir) / "run.log").read_text()
    assert "--- retry 1 ---" in log and "--- retry 2 ---" in log and "--- retry 3" not in log
    alerts = list(Alert.objects.filter(agent_id=run.agent_id).order_by("created_at"))
    assert [a.signature for a in alerts] == [
        "gpu_conflict_retry",
        "gpu_conflict_retry",
        "gpu_conflict_final",
    ]
    assert "cuda_out_of_memory" in alerts[0].message


def test_bad_executor_options_fail_the_run_before_its_command_runs(daemons, tmp_path):
    daemons()
    marker = tmp_path / "ran"
    run = launch_run(tmp_path, f"touch {marker}", executor_options={"thresholds": {"window": 0}})
    run = run_ended(run)
    assert run.status == RunStatus.FAILED
    assert "bad executor options" in run.error and "window" in run.error
    assert not marker.exists()
    assert not GPU.objects.filter(allocated_to__isnull=False).exists()


def _run_in_flight(tmp_path, seconds=6):
    run = launch_run(tmp_path, f"sleep {seconds}; echo finished; exit 0", gpu_required=1)
    wait_until(lambda: Run.objects.get(pk=run.pk).status == RunStatus.RUNNING, 20)
    wait_event(run.agent_id, "run_started")
    pid = int((Path(Run.objects.get(pk=run.pk).run_dir) / "job.pid").read_text().split()[0])
    return Run.objects.get(pk=run.pk), pid


def test_sigkill_of_runagentd_during_a_long_run_re_adopts_it_and_tells_the_parent(
    daemons, tmp_path, agentsys_config
):
    agentsys_config(extra_agent_classes=frozenset(runtime_agents.ALL.split(",")))
    daemons("brain", "0")  # no GPUs: it hosts the research agent, never the executor
    # The command runs until the test says so (not a fixed 20 s): long enough to outlive the
    # kill and the restart however slow the machine, and no longer.
    release = tmp_path / "release"
    executor_config = {
        "command": f"while [ ! -e {release} ]; do sleep 0.1; done; echo finished; exit 0",
        "workdir": str(tmp_path),
    }
    parent = request_agent_start(
        cls_path=f"{runtime_agents.MODULE}.TestResearch",
        goal="train",
        project="demo",
        config={
            "children": [{"cls": EXECUTOR, "config": {**executor_config, "gpu_required": 1}}],
            "wait_children": True,
            "wait_for_file": str(tmp_path / "go"),
        },
    )
    wait_status(parent.id, AgentStatus.RUNNING)
    gpu_host = daemons("phoenix", "1")
    (tmp_path / "go").touch()  # the executor is submitted once a host has a GPU for it
    executor = wait_child(parent.id)
    wait_event(executor.id, "run_started")
    run_dir = tmp_path / ".agents" / "runs" / executor.id
    command_pid = int((run_dir / "job.pid").read_text().split()[0])
    worker_pid = Agent.objects.get(pk=executor.id).pid

    gpu_host.stop(signal.SIGKILL)
    try:
        wait_until(lambda: not pid_alive(worker_pid), 10, message="the old worker to leave")
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {describe_process(worker_pid)}") from None
    assert pid_alive(command_pid)  # the user's command outlived runagentd and its worker
    waiting = launch_run(tmp_path, "true", gpu_required=1)  # the only GPU is still booked
    daemons("phoenix", "1")
    wait_event(executor.id, "run_adopted", timeout=10)
    request = ScheduleRequest.objects.get(agent_id=executor.id)
    assert list(GPU.objects.filter(allocated_to__isnull=False).values_list("allocated_to")) == [
        (request.id,)
    ]
    assert Run.objects.get(pk=waiting.pk).status == RunStatus.QUEUED
    assert not Event.objects.filter(agent_id=parent.id, kind="child_result").exists()

    release.touch()
    told = wait_event(parent.id, "child_result", timeout=40)
    assert told.payload["child_id"] == executor.id and told.payload["status"] == "done"
    result = MemoryEntry.objects.get(agent_id=executor.id, type="result")
    assert result.data["exit_code"] == 0
    assert (run_dir / "run.log").read_text().strip().endswith("finished")
    assert ScheduleRequest.objects.get(pk=request.pk).status == RequestStatus.DONE
    assert run_ended(waiting).status == RunStatus.DONE  # then the GPU went to the next one
    assert wait_status(parent.id, AgentStatus.DONE)


def test_a_run_that_ended_while_runagentd_was_down_keeps_its_exit_code(daemons, tmp_path):
    daemon = daemons("phoenix", "1")
    run = launch_run(tmp_path, "sleep 2; exit 7", gpu_required=1)
    wait_until(lambda: Run.objects.get(pk=run.pk).status == RunStatus.RUNNING, 20)
    wait_event(run.agent_id, "run_started")
    daemon.stop(signal.SIGKILL)
    run_dir = Path(Run.objects.get(pk=run.pk).run_dir)
    wait_until(lambda: (run_dir / "job.done").exists(), 10, message="the command to end")
    assert Run.objects.get(pk=run.pk).status == RunStatus.RUNNING  # nobody watched it end
    daemons("phoenix", "1")
    run = run_ended(run)
    assert (run.status, run.exit_code) == (RunStatus.FAILED, 7)
    assert not GPU.objects.filter(allocated_to__isnull=False).exists()


def test_a_run_killed_with_runagentd_and_no_exit_code_is_lost(daemons, tmp_path):
    daemon = daemons("phoenix", "1")
    run, command_pid = _run_in_flight(tmp_path, seconds=30)
    daemon.stop(signal.SIGKILL)
    os.killpg(command_pid, signal.SIGKILL)  # the wrapper too: nothing writes job.done
    wait_until(lambda: not pid_alive(command_pid), 5)
    daemons("phoenix", "1")
    run = run_ended(run)
    assert run.status == RunStatus.LOST and run.exit_code is None
    assert "lost" in run.error
    assert not GPU.objects.filter(allocated_to__isnull=False).exists()


def test_sigkill_of_runagentd_mid_run_re_adopts_the_run_and_its_metrics(daemons, tmp_path):
    # The executor runs inside runagentd: killing it loses the executor, not the run.
    daemon = daemons("solo", "1")
    writer = (
        f'{PY} -c "import json,os,time\n'
        "for i in range(30):\n"
        "    f = open(os.environ['AGENTSYS_RUN_DIR'] + '/agent_metrics.jsonl', 'a')\n"
        "    f.write(json.dumps({'_step': i, 'loss': 1.0}) + '\\n'); f.close(); time.sleep(0.2)\""
    )
    run = launch_run(tmp_path, writer, gpu_required=1)
    wait_event(run.agent_id, "metrics", timeout=20)  # some rows stored by the first executor
    command_pid = int((Path(Run.objects.get(pk=run.pk).run_dir) / "job.pid").read_text().split()[0])
    daemon.stop(signal.SIGKILL)
    assert pid_alive(command_pid)
    daemons("solo", "1")
    wait_event(run.agent_id, "resumed_after_restart", timeout=10)
    run = run_ended(run)
    assert (run.status, run.exit_code) == (RunStatus.DONE, 0)
    assert len(events(run.agent_id, "run_adopted")) == 1
    assert len(events(run.agent_id, "run_started")) == 1  # never started twice
    loss = MetricSeries.objects.get(run=run, key="loss")
    steps = sorted(MetricPoint.objects.filter(series=loss).values_list("step", flat=True))
    assert steps == list(range(30))  # none lost, none stored twice


@pytest.mark.parametrize("job_pid", ["empty", "missing"])
def test_a_run_whose_job_pid_the_kill_cut_short_is_adopted_not_killed_nor_run_twice(
    daemons, tmp_path, job_pid
):
    """runagentd killed between starting the command and writing job.pid (CI: the re-adopting
    executor found no pid, killed the live run by its marker and called it lost; with no
    job.pid at all it started the command a second time)."""
    daemon = daemons("solo", "1")
    release, starts = tmp_path / "release", tmp_path / "starts"
    command = f"echo start >> {starts}; while [ ! -e {release} ]; do sleep 0.1; done; exit 0"
    run = launch_run(tmp_path, command, gpu_required=1)
    wait_event(run.agent_id, "run_started")
    run_dir = Path(Run.objects.get(pk=run.pk).run_dir)
    command_pid = int((run_dir / "job.pid").read_text().split()[0])
    daemon.stop(signal.SIGKILL)
    if job_pid == "empty":
        (run_dir / "job.pid").write_text("")  # as a kill inside the write leaves it
    else:
        (run_dir / "job.pid").unlink()  # a kill just before it
    daemons("solo", "1")
    adopted = wait_event(run.agent_id, "run_adopted", timeout=20)
    assert adopted.payload == {"pid": command_pid, "alive": True}
    assert pid_alive(command_pid)
    release.touch()
    run = run_ended(run)
    assert (run.status, run.exit_code) == (RunStatus.DONE, 0)
    assert starts.read_text() == "start\n"  # the command ran once
    assert len(events(run.agent_id, "run_started")) == 1


def test_only_the_latest_attempts_output_decides_a_retry(daemons, tmp_path):
    daemons()
    marker = tmp_path / "tried"
    command = (
        f"if [ -e {marker} ]; then echo 'ValueError: bad config'; exit 2; fi; "
        f"touch {marker}; cat {OOM_FIXTURE}; exit 1"
    )
    run = launch_run(tmp_path, command, executor_options={"retry_base_delay": 0.1})
    run = run_ended(run)
    assert (run.status, run.exit_code) == (RunStatus.FAILED, 2)
    signatures = list(Alert.objects.filter(agent_id=run.agent_id).values_list("signature"))
    assert signatures == [("gpu_conflict_retry",)]  # the OOM of attempt 0 is not retried twice


def test_stopping_a_run_kills_its_whole_process_group(daemons, tmp_path):
    daemons()
    run = launch_run(tmp_path, "sleep 300 & sleep 300; wait")
    wait_until(lambda: Run.objects.get(pk=run.pk).status == RunStatus.RUNNING, 20)
    wait_event(run.agent_id, "run_started")
    pid = int((Path(Run.objects.get(pk=run.pk).run_dir) / "job.pid").read_text().split()[0])
    started = time.monotonic()
    runs.stop_run(run_id=run.pk)
    run = run_ended(run)
    assert run.status == RunStatus.STOPPED
    assert time.monotonic() - started < 8
    wait_until(lambda: not pid_alive(pid), 5, message="the run's shell to be gone")
    wait_status(run.agent_id, AgentStatus.STOPPED)
