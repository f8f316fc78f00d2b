"""A 3-level agent tree on real processes: L1 inside runagentd, L2 and L3 in workers."""

import pytest

from agents_app.models import Agent
from agents_app.services import request_agent_start
from agentsys.types import AgentStatus
from events_app.models import Event
from memory_app.models import MemoryEntry
from tests.runtime_harness import A, DaemonProcess, events, wait_status

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def allow_test_agents(agentsys_config):
    from tests.runtime_agents import ALL

    agentsys_config(extra_agent_classes=frozenset(ALL.split(",")))


@pytest.fixture
def daemon(allow_test_agents):
    process = DaemonProcess("tree-host")
    yield process
    process.stop()


def test_three_level_tree_runs_to_done(daemon):
    l3 = {
        "cls": f"{A}.TestExecutor",
        "goal": "train",
        "config": {"ticks": 3},
        "scope": {"run": "run-1"},
    }
    l2 = {
        "cls": f"{A}.TestResearch",
        "goal": "research",
        "config": {"children": [l3], "wait_children": True},
        "scope": {"session": "s-1"},
    }
    root = request_agent_start(
        cls_path=f"{A}.TestSession",
        goal="chat",
        project="demo",
        config={"children": [l2], "wait_children": True},
    )
    wait_status(root.id, AgentStatus.DONE)
    l1 = Agent.objects.get(pk=root.id)
    l2_row = Agent.objects.get(parent=l1)
    l3_row = Agent.objects.get(parent=l2_row)
    assert [a.status for a in (l1, l2_row, l3_row)] == ["done"] * 3
    assert l1.pid == daemon.pid  # L1 runs inside runagentd
    assert len({l1.pid, l2_row.pid, l3_row.pid}) == 3  # L2 and L3 in their own processes
    assert l2_row.id.startswith("orchestrator-") and l3_row.id.startswith("executor-")
    # Scope is inherited and narrowed.
    assert (l2_row.project, l2_row.session, l2_row.run) == ("demo", "s-1", "")
    assert (l3_row.project, l3_row.session, l3_row.run) == ("demo", "s-1", "run-1")
    # Each agent's lifecycle is stored in order, with one terminal event.
    for agent in (l1, l2_row, l3_row):
        kinds = [e.kind for e in events(agent.id) if e.kind in {"spawned", "started", "done"}]
        assert kinds == ["spawned", "started", "done"] if agent != l1 else ["started", "done"]
    results = {
        e.payload["child_id"]: e.payload["status"] for e in events(l2_row.id, "child_result")
    }
    assert results == {l3_row.id: "done"}
    assert l1.result is None or l1.result["children"] == {l2_row.id: "done"}
    seqs = list(Event.objects.filter(stream="agents").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))  # no holes


def test_failure_is_recorded_with_an_error_entry(daemon):
    root = request_agent_start(
        cls_path=f"{A}.TestResearch",
        goal="doomed",
        project="demo",
        config={"fail": "the GPU caught fire"},
    )
    agent = wait_status(root.id, AgentStatus.FAILED)
    assert agent.error == "RuntimeError: the GPU caught fire"
    entry = MemoryEntry.objects.get(agent_id=root.id, tags__contains=["error"])
    assert "the GPU caught fire" in entry.data["traceback"]
    assert len(events(root.id, "failed")) == 1


def test_on_monitor_exception_does_not_kill_the_agent(daemon):
    root = request_agent_start(
        cls_path=f"{A}.MonitoredResearch",
        goal="watch",
        project="demo",
        config={"monitor_raises": True, "ticks": 10},
    )
    agent = wait_status(root.id, AgentStatus.DONE)
    assert agent.result == {"ticks": 10}
    assert len(events(root.id, "monitored")) >= 2  # kept being called after raising
