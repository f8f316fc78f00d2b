"""Pausing an executor suspends its run's processes (SIGSTOP, its GPU stays booked) and
resuming continues them; a stop of a paused run still ends it; a pause that cannot be
honoured is refused with a reason. Through the REST API, on a real runagentd."""

import contextlib
import os
import signal
import time
from pathlib import Path

import pytest

from agents_app.models import Agent, AgentCommand
from agentsys.types import AgentStatus
from scheduler_app.models import GPU, Run, RunStatus
from scheduler_app.runs import launch as runs
from tests.helpers import wait_until
from tests.integration.test_run_processes import session_members
from tests.runtime_harness import DaemonProcess, events, wait_event

EXECUTOR = "agentsys.agents.executor.ExecutorAgent"

TICKER = (
    'while true; do echo x >> "$AGENTSYS_RUN_DIR/ticks"; sleep 0.1; done & '
    'while true; do echo y >> "$AGENTSYS_RUN_DIR/ticks2"; sleep 0.1; done'
)


def sizes(run_dir: Path) -> tuple[int, int]:
    return tuple((run_dir / name).stat().st_size for name in ("ticks", "ticks2"))


def grows(run_dir: Path, within: float = 10) -> bool:
    """Both files grow (the ticker writes every 0.1 s; a loaded machine may be slower)."""
    before = sizes(run_dir)
    wait_until(lambda: all(a > b for a, b in zip(sizes(run_dir), before, strict=True)), within)
    return True


def still(run_dir: Path, seconds: float = 0.6) -> bool:
    """Neither file grows for `seconds` (6 ticks of the ticker)."""
    before = sizes(run_dir)
    time.sleep(seconds)
    return sizes(run_dir) == before


def states(session: int) -> dict[int, str]:
    found = {}
    for pid in session_members(session):
        try:
            found[pid] = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
    return found


def api_status(api, agent_id: str) -> str:
    response = api("get", f"/api/agents/{agent_id}")
    assert response.status_code == 200
    return response.json()["status"]


def command(api, agent_id: str, kind: str) -> None:
    response = api("post", f"/api/agents/{agent_id}/{kind}")
    assert response.status_code == 202, response.json()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_pause_suspends_the_run_resume_continues_it_and_stop_ends_it_paused(api, tmp_path):
    daemon = DaemonProcess("pause-host", AGENTSYS_GPUS="1")
    leader = 0
    try:
        run = runs.create_run(
            name="ticker", command=TICKER, workdir=str(tmp_path), gpu_required=1, auto_start=True
        )
        agent_id = run.agent_id
        wait_event(agent_id, "run_started")
        run = Run.objects.get(pk=run.pk)
        run_dir = Path(run.run_dir)
        wait_until(lambda: (run_dir / "ticks2").exists(), 10)
        assert grows(run_dir)
        leader = int((run_dir / "job.pid").read_text().split()[0])

        command(api, agent_id, "pause")
        wait_until(lambda: api_status(api, agent_id) == "paused", 10)
        paused = events(agent_id, "run_paused")
        assert len(paused) == 1 and leader in paused[0].payload["pids"]
        stopped = states(leader)
        assert len(stopped) >= 3 and set(stopped.values()) == {"T"}, stopped  # wrapper, 2 shells
        assert still(run_dir)
        assert GPU.objects.filter(allocated_to__isnull=False).count() == 1  # still booked
        assert api("get", f"/api/runs/{run.pk}").json()["status"] == "paused"

        # runagentd (its executor with it) dies while paused: the next re-adopts the run,
        # still paused.
        daemon.stop(signal.SIGKILL)
        daemon = DaemonProcess("pause-host", AGENTSYS_GPUS="1")
        wait_event(agent_id, "run_adopted")
        wait_until(lambda: len(events(agent_id, "run_paused")) == 2, 10)
        wait_until(lambda: api_status(api, agent_id) == "paused", 10)
        assert set(states(leader).values()) == {"T"} and still(run_dir)

        command(api, agent_id, "resume")
        wait_until(lambda: api_status(api, agent_id) == "running", 10)
        assert len(events(agent_id, "run_resumed")) == 1
        assert grows(run_dir)
        assert "T" not in states(leader).values()
        assert Run.objects.get(pk=run.pk).started_at == run.started_at  # not a new start
        assert api("get", f"/api/runs/{run.pk}").json()["status"] == "running"

        command(api, agent_id, "pause")
        wait_until(lambda: api("get", f"/api/runs/{run.pk}").json()["status"] == "paused", 10)
        stop = api("post", f"/api/runs/{run.pk}/stop")  # a paused run stops like a running one
        assert stop.status_code == 200, stop.json()
        wait_until(lambda: Run.objects.get(pk=run.pk).status == RunStatus.STOPPED, 15)
        assert states(leader) == {}
        assert not GPU.objects.filter(allocated_to__isnull=False).exists()
        assert api_status(api, agent_id) == "stopped"
    finally:
        daemon.stop()
        for pid in session_members(leader) if leader else []:  # left by a failure
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("status", "config", "reason"),
    [
        (
            AgentStatus.RUNNING,
            {"backend": "mock"},
            "runs the mock backend, which has no process to suspend: it cannot be paused",
        ),
        (
            AgentStatus.RUNNING,
            {"backend": "callback", "callback": "x.y"},
            "runs the callback backend, which has no process to suspend",
        ),
        (AgentStatus.IDLE, {}, "has not started yet (idle or queued)"),
    ],
)
def test_a_pause_that_cannot_be_honoured_is_refused_with_its_reason(api, status, config, reason):
    Agent.objects.create(
        id="executor-x", role="executor", cls_path="c", goal="g", status=status, config=config
    )
    response = api("post", "/api/agents/executor-x/pause")
    assert response.status_code == 409
    assert reason in response.json()["detail"]
    assert not AgentCommand.objects.exists()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_subtree_pause_leaves_a_mock_executor_running_and_says_why(agentsys_config):
    from agents_app.services import request_agent_command, request_agent_start
    from agentsys.types import CommandKind
    from tests.runtime_agents import ALL, MODULE
    from tests.runtime_harness import wait_child, wait_status

    agentsys_config(extra_agent_classes=frozenset(ALL.split(",")))
    daemon = DaemonProcess("pause-tree")
    try:
        mock = {"backend": "mock", "mock_delay": 60}
        parent = request_agent_start(
            cls_path=f"{MODULE}.TestResearch",
            goal="g",
            project="demo",
            config={"forever": True, "children": [{"cls": EXECUTOR, "config": mock}]},
        )
        child = wait_child(parent.id)
        wait_status(child.id, AgentStatus.RUNNING)
        request_agent_command(agent_id=parent.id, kind=CommandKind.PAUSE)
        wait_status(parent.id, AgentStatus.PAUSED)
        refused = wait_event(child.id, "pause_refused")
        assert "mock backend runs no process that can be suspended" in refused.payload["reason"]
        assert Agent.objects.get(pk=child.id).status == AgentStatus.RUNNING
        request_agent_command(agent_id=parent.id, kind=CommandKind.STOP)
        wait_status(child.id, AgentStatus.STOPPED)
    finally:
        daemon.stop()
