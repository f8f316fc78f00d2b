"""Hierarchy rules, the stop cascade, pause/resume and the three steer tiers, on real
processes driven through the same services the REST API and the admin use."""

import time

import pytest
from django.db import transaction

from agents_app.models import Agent, AgentCommand, CommandStatus
from agents_app.services import request_agent_command, request_agent_start, steer_agent
from agentsys.types import AgentStatus, CommandKind, RequestStatus
from memory_app.models import MemoryEntry
from scheduler_app.models import ScheduleRequest
from tests.helpers import pid_alive, wait_until
from tests.runtime_harness import (
    A,
    DaemonProcess,
    events,
    wait_child,
    wait_event,
    wait_status,
)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
RUNNING, PAUSED, STOPPED = AgentStatus.RUNNING, AgentStatus.PAUSED, AgentStatus.STOPPED


@pytest.fixture
def daemon(agentsys_config):
    from tests.runtime_agents import ALL

    agentsys_config(extra_agent_classes=frozenset(ALL.split(",")))
    process = DaemonProcess("control-host")
    yield process
    process.stop()


def start(cls: str, **config) -> Agent:
    return request_agent_start(
        cls_path=f"{A}.{cls}", goal=f"{cls} goal", project="demo", config=config
    )


@pytest.mark.parametrize(
    ("parent", "child", "child_role", "allowed"),
    [
        ("TestResearch", "TestSession", "orchestrator", "executor, sidecar"),
        ("TestExecutor", "TestResearch", "orchestrator", "sidecar"),
        ("TestExecutor", "TestExecutor", "executor", "sidecar"),
        ("TestSidecar", "TestSidecar", "sidecar", "none (it is a leaf)"),
    ],
)
def test_forbidden_spawn_names_both_sides(daemon, parent, child, child_role, allowed):
    agent = start(parent, try_spawn=f"{A}.{child}")
    refused = wait_event(agent.id, "spawn_refused")
    wait_status(agent.id, AgentStatus.DONE)
    assert refused.payload["type"] == "HierarchyError"
    role = Agent.objects.get(pk=agent.id).role
    assert refused.payload["error"] == (
        f"{role} agent {agent.id} may not spawn a {child_role} child; "
        f"allowed child roles: {allowed}"
    )
    assert not Agent.objects.filter(parent_id=agent.id).exists()


def test_a_class_off_the_allow_list_is_never_imported(daemon):
    agent = start("TestResearch", try_spawn="os.system")
    refused = wait_event(agent.id, "spawn_refused")
    assert "is not an allowed agent class" in refused.payload["error"]
    with pytest.raises(Exception, match="not an allowed agent class"):
        request_agent_start(cls_path="subprocess.Popen", goal="x", project="demo")


def test_stop_cascade_kills_a_grandchild_that_ignores_sigterm(daemon):
    stubborn = {
        "cls": f"{A}.TestExecutor",
        "config": {
            "forever": True,
            "ignore_stop": True,
            "ignore_sigterm": True,
            "shell": "trap '' TERM; sleep 300",
        },
    }
    middle = {"cls": f"{A}.TestResearch", "config": {"forever": True, "children": [stubborn]}}
    root = start("TestSession", forever=True, children=[middle])
    l2 = wait_child(root.id)
    l3 = wait_child(l2.id)
    shell_pid = wait_event(l3.id, "shell").payload["pid"]
    wait_status(l3.id, RUNNING)
    other = start("TestResearch", forever=True)
    wait_status(other.id, RUNNING)
    # A sibling executor still waiting for a GPU (this host has none to give it).
    with transaction.atomic():  # an idle agent with no request would be started at once
        waiting = Agent.objects.create(
            id="executor-waiting",
            role="executor",
            cls_path=f"{A}.TestExecutor",
            goal="wait",
            parent_id=l2.id,
        )
        queued = ScheduleRequest.objects.create(
            agent=waiting, agent_cls_path=waiting.cls_path, parent_id=l2.id, gpu_required=1
        )

    started = time.monotonic()
    request_agent_command(agent_id=root.id, kind=CommandKind.STOP)
    # The daemon's loop is not blocked while the stubborn leaf uses up its grace.
    time.sleep(0.3)
    request_agent_command(agent_id=other.id, kind=CommandKind.PAUSE)
    wait_status(other.id, PAUSED, timeout=1.5)
    assert Agent.objects.get(pk=l3.id).status == RUNNING  # still in its grace period

    for agent_id in (l3.id, l2.id, root.id):
        wait_status(agent_id, STOPPED, timeout=15)
    took = time.monotonic() - started
    assert 2.5 < took < 10  # 1 s grace, 2 s after SIGTERM, then SIGKILL
    order = [events(a, "stopped")[0].seq for a in (l3.id, l2.id, root.id)]
    assert order == sorted(order)  # leaves first
    wait_until(lambda: not pid_alive(shell_pid), 5, message="the shell to be gone, not a zombie")
    assert not pid_alive(Agent.objects.get(pk=l3.id).pid)
    assert ScheduleRequest.objects.get(pk=queued.pk).status == RequestStatus.CANCELLED
    assert Agent.objects.get(pk=waiting.pk).status == AgentStatus.CANCELLED  # it never ran
    assert Agent.objects.get(pk=other.id).status == PAUSED  # untouched by the cascade


def test_pause_and_resume_cascade_to_live_descendants_only(daemon):
    done_child = {"cls": f"{A}.TestExecutor", "config": {"ticks": 1}}
    live_child = {"cls": f"{A}.TestExecutor", "config": {"forever": True, "emit_ticks": True}}
    parent = start("TestResearch", forever=True, emit_ticks=True, children=[done_child, live_child])
    wait_until(lambda: Agent.objects.filter(parent_id=parent.id).count() == 2, 10)
    finished, live = Agent.objects.filter(parent_id=parent.id).order_by("created_at")
    wait_status(finished.id, AgentStatus.DONE)
    wait_event(live.id, "tick")

    request_agent_command(agent_id=parent.id, kind=CommandKind.PAUSE)
    wait_status(parent.id, PAUSED)
    wait_status(live.id, PAUSED)
    time.sleep(0.2)  # a tick already in flight may still land
    ticks = len(events(live.id, "tick"))
    time.sleep(0.5)
    assert len(events(live.id, "tick")) == ticks  # really paused
    assert Agent.objects.get(pk=finished.id).status == AgentStatus.DONE  # never touched
    assert not events(finished.id, "paused")

    request_agent_command(agent_id=parent.id, kind=CommandKind.RESUME)
    wait_status(parent.id, RUNNING)
    wait_status(live.id, RUNNING)
    wait_until(lambda: len(events(live.id, "tick")) > ticks, 5, message="ticks again")


def test_priority_steer_reaches_the_running_agent(daemon):
    agent = start("TestResearch", forever=True)
    wait_status(agent.id, RUNNING)
    command = steer_agent(
        agent_id=agent.id, context="focus on the learning rate", urgency="priority"
    )
    seen = wait_event(agent.id, "steer_seen")
    assert seen.payload["context"] == "focus on the learning rate"
    command.refresh_from_db()
    assert command.status == CommandStatus.DELIVERED


def test_message_steer_lands_in_the_inbox(daemon):
    agent = start("TestResearch", forever=True)
    wait_status(agent.id, RUNNING)
    entry = steer_agent(agent_id=agent.id, context="see the new baseline", urgency="message")
    stored = MemoryEntry.objects.get(pk=entry.pk)
    assert (stored.type, stored.target_id, stored.data) == (
        "message",
        agent.id,
        {"context": "see the new baseline"},
    )
    assert not AgentCommand.objects.filter(agent_id=agent.id).exists()


def test_critical_steer_respawns_and_the_parent_follows(daemon):
    child = {"cls": f"{A}.TestResearch", "config": {"forever": True, "tick": 0.02}}
    root = start("TestSession", children=[child], wait_children=True)
    old = wait_child(root.id)
    wait_status(old.id, RUNNING)

    steer_agent(agent_id=old.id, context="use Adam instead", urgency="critical")
    wait_status(old.id, STOPPED)
    old.refresh_from_db()
    new = wait_until(
        lambda: (
            Agent.objects.filter(pk=old.id)
            .exclude(superseded_by=None)
            .values_list("superseded_by", flat=True)
            .first()
        ),
        10,
    )
    replacement = wait_status(new, RUNNING)
    assert replacement.goal == f"{old.goal} [STEER: use Adam instead]"
    assert (replacement.parent_id, replacement.cls_path, replacement.config) == (
        old.parent_id,
        old.cls_path,
        old.config,
    )
    assert (replacement.project, replacement.session) == (old.project, old.session)
    assert events(old.id, "superseded")[0].payload["new_id"] == new

    # The parent's handle follows the new id: it sees the replacement finish, not the old stop.
    request_agent_command(agent_id=new, kind=CommandKind.STOP)
    result = wait_event(root.id, "child_result")
    assert (result.payload["child_id"], result.payload["status"]) == (new, "stopped")


def test_commands_to_finished_agents_are_refused(daemon):
    agent = start("TestResearch", ticks=1)
    wait_status(agent.id, AgentStatus.DONE)
    from agents_app.services import AgentCommandRefused

    with pytest.raises(AgentCommandRefused, match="is done"):
        steer_agent(agent_id=agent.id, context="too late", urgency="priority")
    with pytest.raises(Agent.DoesNotExist):
        request_agent_command(agent_id="orchestrator-00000000", kind=CommandKind.STOP)
