"""Crashes: a killed worker, a killed runagentd, two daemons on
one database, and a host that stops heart-beating."""

import os
import signal
import time

import pytest

from agents_app.models import Agent
from agents_app.services import request_agent_start
from agentsys.types import AgentStatus
from events_app.models import Event
from hosts_app.models import Host, HostStatus
from tests.helpers import pid_alive, wait_until
from tests.runtime_harness import A, DaemonProcess, events, wait_child, wait_event, wait_status

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def allow_test_agents(agentsys_config):
    from tests.runtime_agents import ALL

    agentsys_config(extra_agent_classes=frozenset(ALL.split(",")))


@pytest.fixture
def daemons():
    started: list[DaemonProcess] = []

    def start(name: str, *args: str) -> DaemonProcess:
        started.append(DaemonProcess(name, *args))
        return started[-1]

    yield start
    for daemon in started:
        daemon.stop(signal.SIGKILL if daemon.process.poll() is None else signal.SIGTERM)


def start(cls: str, **config) -> Agent:
    return request_agent_start(cls_path=f"{A}.{cls}", goal=cls, project="demo", config=config)


def test_sigkill_of_a_worker_fails_it_within_1s_and_tells_the_parent(daemons):
    daemons("crash-host")
    root = start(
        "TestSession",
        children=[{"cls": f"{A}.TestResearch", "config": {"forever": True}}],
        wait_children=True,
    )
    child = wait_child(root.id)
    child = wait_status(child.id, AgentStatus.RUNNING)
    killed_at = time.monotonic()
    os.kill(child.pid, signal.SIGKILL)
    failed = wait_status(child.id, AgentStatus.FAILED, timeout=5)
    assert time.monotonic() - killed_at < 1.0
    assert failed.error == "worker process killed by SIGKILL"
    terminal = [e for e in events(child.id) if e.kind in {"done", "failed", "stopped"}]
    assert len(terminal) == 1
    told = wait_event(root.id, "child_result")
    assert told.payload == {
        "child_id": child.id,
        "status": "failed",
        "error": "worker process killed by SIGKILL",
    }


def test_sigkill_of_runagentd_then_restart_reconciles(daemons):
    first = daemons("phoenix")
    plain = start("TestResearch", forever=True)
    resumable = start("ResumableResearch", forever=True)
    old_pids = [wait_status(a.id, AgentStatus.RUNNING).pid for a in (plain, resumable)]
    first.stop(signal.SIGKILL)
    wait_until(
        lambda: not any(pid_alive(p) for p in old_pids),
        10,
        message="the old workers to notice their supervisor is gone",
    )
    assert Agent.objects.get(pk=plain.id).status == AgentStatus.RUNNING  # nobody told the DB

    restarted_at = time.monotonic()
    daemons("phoenix")
    lost = wait_status(plain.id, AgentStatus.FAILED, timeout=10)
    assert "restarted while this agent ran" in lost.error
    wait_event(resumable.id, "resumed", timeout=10)
    assert time.monotonic() - restarted_at < 10
    again = Agent.objects.get(pk=resumable.id)
    assert again.status == AgentStatus.RUNNING and again.pid not in old_pids
    assert pid_alive(again.pid)
    assert not Agent.objects.filter(status=AgentStatus.RUNNING).exclude(pk=resumable.id)


def test_two_daemons_never_run_the_same_agent(daemons):
    daemons("twin-a")
    daemons("twin-b")
    agents = [start("TestResearch", ticks=2) for _ in range(16)]
    for agent in agents:
        wait_status(agent.id, AgentStatus.DONE, timeout=30)
    for agent in agents:
        assert Event.objects.filter(agent_id=agent.id, kind="started").count() == 1
    hosts = set(
        Agent.objects.filter(pk__in=[a.id for a in agents]).values_list("host__name", flat=True)
    )
    assert hosts <= {"twin-a", "twin-b"}


def test_a_host_that_stops_heartbeating_is_declared_dead(daemons):
    doomed = daemons("doomed")
    agent = start("TestResearch", forever=True)
    wait_status(agent.id, AgentStatus.RUNNING)
    doomed.stop(signal.SIGKILL)
    daemons("survivor", "--dead-after", "2")
    failed = wait_status(agent.id, AgentStatus.FAILED, timeout=15)
    assert "host doomed stopped heart-beating" in failed.error
    assert Host.objects.get(name="doomed").status == HostStatus.DEAD
