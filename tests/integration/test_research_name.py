"""One name for the L2 agent (issue 18): a research loop is `research` in its id, the API's
role, the agents tree and the console; the chat's session agent (L1) stays apart; loops
started before keep their `orchestrator-…` ids, and every link naming them still works."""

from __future__ import annotations

import importlib
import logging

import pytest
from django.apps import apps

from agents_app.models import Agent
from agentsys.registry import RESEARCH_AGENT, SESSION_AGENT
from agentsys.types import AgentStatus
from memory_app.models import MemoryEntry
from research_app.models import ResearchLoop
from runtime_app.runtime_store import DjangoRuntimeStore
from tests.chromium import PASSWORD, USER

pytestmark = pytest.mark.django_db
relabel = importlib.import_module("agents_app.migrations.0004_research_role")


@pytest.fixture
def workdir(tmp_path, settings):
    settings.AGENTSYS_WORKDIR = tmp_path
    return tmp_path


@pytest.fixture
def person(client, django_user_model):
    django_user_model.objects.create_user(USER, password=PASSWORD)
    client.login(username=USER, password=PASSWORD)
    return client


def _tree_row(page: str, agent_id: str) -> str:
    start = page.index(f'id="agent-{agent_id}"')
    return page[start : page.index("</div>", start)]


def test_a_new_loop_says_research_in_its_id_api_tree_and_console(api, person, workdir, caplog):
    l1 = Agent.objects.create(
        id="orchestrator-l1", role="orchestrator", cls_path=SESSION_AGENT, project="p"
    )
    started = api("post", "/api/research", {"goal": "Tune lr", "workdir": str(workdir)})
    assert started.status_code == 201, started.content
    loop_id = started.json()["id"]
    assert loop_id.startswith("research-")
    Agent.objects.filter(pk=loop_id).update(parent=l1)

    assert api("get", f"/api/agents/{loop_id}").json()["role"] == "research"
    listed = api("get", "/api/agents?role=research").json()
    assert [agent["id"] for agent in listed] == [loop_id]  # not the L1 agent
    assert api("get", f"/api/agents/{l1.id}").json()["role"] == "orchestrator"

    page = person.get("/agents/").content.decode()
    assert "L2 research" in _tree_row(page, loop_id)
    assert f'href="/research/{loop_id}/"' in _tree_row(page, loop_id)
    assert "L1 session" in _tree_row(page, l1.id)

    with caplog.at_level(logging.INFO, logger="scheduler_app"):
        DjangoRuntimeStore().transition(
            agent_id=loop_id, status=AgentStatus.RUNNING, kind="started", payload={}, pid=1
        )
    assert f"agent {loop_id} (research) idle -> running" in caplog.text


def _old_loop() -> Agent:
    """A loop as stored before the rename: `orchestrator` in its id and its role."""
    agent = Agent.objects.create(
        id="orchestrator-0ld1oop0",
        role="orchestrator",
        cls_path=RESEARCH_AGENT,
        project="p",
        goal="An old search",
    )
    ResearchLoop.objects.create(agent=agent, goal=agent.goal, settings={})
    MemoryEntry.objects.create(
        key="k-old", type="reflection", agent_id=agent.id, role="orchestrator", project="p"
    )
    return agent


def test_the_migration_relabels_old_loops_and_keeps_their_ids():
    old = _old_loop()
    l1 = Agent.objects.create(
        id="orchestrator-l1", role="orchestrator", cls_path=SESSION_AGENT, project="p"
    )
    relabel.forwards(apps, None)
    assert Agent.objects.get(pk=old.id).role == "research"
    assert MemoryEntry.objects.get(key="k-old").role == "research"
    assert Agent.objects.get(pk=l1.id).role == "orchestrator"  # L1 keeps its role


def test_an_old_orchestrator_id_still_resolves_everywhere(api, person):
    old = _old_loop()
    relabel.forwards(apps, None)
    assert api("get", f"/api/research/{old.id}").status_code == 200
    steer = {"context": "Try a cosine schedule", "urgency": "message"}
    assert api("post", f"/api/research/{old.id}/steer", steer).status_code == 202
    agent = api("get", f"/api/agents/{old.id}").json()
    assert (agent["id"], agent["role"]) == (old.id, "research")
    assert person.get(f"/research/{old.id}/").status_code == 200
    assert "L2 research" in _tree_row(person.get("/agents/").content.decode(), old.id)
