"""Issue 34, item 3, from outside: the real web process (daphne). A research loop's own token
against a person's run is a 403 with the reason over REST, and over `/mcp` (what any MCP
client, and the model's run tools, call) the tool call ends in a tool error carrying that
reason, never a crash; the loop's own runs are still made and started through the same tools."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport

from research_app.services import start_research
from runtime_app.memory_view import DjangoMemoryView
from scheduler_app.models import Run, RunStatus
from scheduler_app.runs import launch as runs
from sessions_app.models import ChatSession
from tests.live_clients import Web

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def web(tmp_path):
    server = Web(AGENTSYS_WORKDIR=str(tmp_path))
    yield server
    server.stop()


def test_a_loops_token_against_a_persons_run_is_refused_over_rest_and_mcp(
    web, tmp_path, settings, django_user_model
):
    settings.AGENTSYS_WORKDIR = tmp_path
    ada = django_user_model.objects.create_user("ada", password="pw-1234567")
    chat = ChatSession.objects.create(owner=ada, title="ada's chat")
    loop = start_research(goal="Tune lr", workdir=str(tmp_path), chat_session_id=chat.pk)
    agent = loop.agent
    token = DjangoMemoryView(agent.id, agent.role, {"sweep": agent.sweep}).issue_api_token()
    persons = runs.create_run(name="ada's own", command="true")
    reason = f"this loop's token may only act on runs of its own sweep ({loop.sweep_id})"

    for headers in ({"X-Auth-Token": token}, {"Authorization": f"Bearer {token}"}):
        refused = httpx.post(f"{web.url}/api/runs/{persons.pk}/start", headers=headers, timeout=30)
        assert refused.status_code == 403, refused.text
        assert reason in refused.json()["detail"]

    async def go():
        transport = StreamableHttpTransport(f"{web.url}/mcp", headers={"X-Auth-Token": token})
        async with Client(transport) as client:
            theirs = await client.call_tool(
                "start_run", {"run_id": persons.pk}, raise_on_error=False
            )
            made = await client.call_tool("create_run", {"name": "mine", "command": "true"})
            started = await client.call_tool("start_run", {"run_id": made.structured_content["id"]})
        return theirs, made.structured_content, started.structured_content

    theirs, made, started = asyncio.run(go())
    assert theirs.is_error
    assert f"AgentSys refused (403): {reason}" in theirs.content[0].text
    assert Run.objects.get(pk=persons.pk).status == RunStatus.READY  # not started
    assert Run.objects.get(pk=made["id"]).sweep_id == loop.sweep_id
    assert started["id"] == made["id"] and started["status"] != RunStatus.READY
