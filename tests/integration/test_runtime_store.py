"""The runtime's database side, one unit of work at a time (no processes)."""

import pytest

from agents_app.models import Agent
from agentsys.types import AgentStatus
from events_app.models import Event
from runtime_app.runtime_store import DjangoRuntimeStore

pytestmark = pytest.mark.django_db


def make(agent_id, parent=None, status=AgentStatus.RUNNING):
    return Agent.objects.create(
        id=agent_id, role="orchestrator", cls_path="x", project="p", parent_id=parent, status=status
    )


def test_live_descendants_deepest_first_skipping_finished():
    make("a")
    make("b", "a")
    make("c", "b")
    make("d", "b", status=AgentStatus.DONE)
    make("e", "d")  # live under a finished parent: still reached
    assert DjangoRuntimeStore().live_descendant_levels(agent_id="a") == [["e"], ["c"], ["b"]]


def test_a_parent_cycle_made_by_hand_does_not_loop():
    make("a")
    make("b", "a")
    Agent.objects.filter(pk="a").update(parent_id="b")
    assert DjangoRuntimeStore().live_descendant_levels(agent_id="a") == [["b"]]


def test_exactly_one_terminal_event_however_many_report_it():
    make("a")
    store = DjangoRuntimeStore()
    first = store.transition(
        agent_id="a", status=AgentStatus.FAILED, kind="failed", payload={}, error="killed"
    )
    again = store.transition(agent_id="a", status=AgentStatus.STOPPED, kind="stopped", payload={})
    assert first is not None and again is None
    assert list(Event.objects.values_list("kind", flat=True)) == ["failed"]
    assert Agent.objects.get(pk="a").status == AgentStatus.FAILED


def test_a_restart_logs_no_transition_that_is_not_one(caplog):
    make("a", status=AgentStatus.RUNNING)
    store = DjangoRuntimeStore()
    with caplog.at_level("INFO", logger="agentsys.ops"):
        # runagentd restarted: the re-adopted agent reports its new pid, still running.
        store.transition(
            agent_id="a", status=AgentStatus.RUNNING, kind="started", payload={}, pid=7
        )
        store.transition(agent_id="a", status=AgentStatus.DONE, kind="done", payload={})
    moves = [r.getMessage() for r in caplog.records if r.name == "agentsys.ops"]
    assert moves == ["agent a (orchestrator) running -> done"]
    assert Agent.objects.get(pk="a").pid == 7
