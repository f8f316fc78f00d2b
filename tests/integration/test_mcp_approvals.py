"""Issue 38 §3: a loop's approval answered over MCP. An outside client (FastMCP's own, at `/mcp`
on the real web process and over stdio from `manage.py mcp`) lists the loops waiting for an
approval and approves one at its cap and one before its batch; a loop not waiting, a name that
is no cap, an amount not above 0 and a loop's own token are tool errors that say why. The
research-agent server OpenCode's model gets has no approval tool at all."""

from __future__ import annotations

import asyncio
import sys

import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport, StreamableHttpTransport

from accounts_app import services as accounts
from agents_app.models import Agent
from agentsys.mcp.opencode_config import server_entries
from memory_app.models import MemoryEntry
from research_app.models import ResearchLoop
from tests.helpers import REPO, child_env, database_url_of_current_connection
from tests.live_clients import Web

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

AT_CAP = {
    "reason": "its gpu_hours cap is reached: 0.0006 spent of 0.0005; it waits for your approval "
    "before its next experiments",
    "cap": {"gpu_hours": 0.0005},
    "spent": {"gpu_hours": 0.0006, "llm_tokens": 10},
}
BATCH = {
    "kind": "batch",
    "reason": "autonomy_level cautious: every batch waits for you (1 runs, 1 GPUs)",
    "batch": [{"goal": "on a GPU", "command": "python train.py --lr 0.2", "gpu_required": 1}],
    "expected_gpu_hours": 0.25,
}


def _loop(agent_id: str, *, status: str = "running", approval: dict | None = None) -> str:
    agent = Agent.objects.create(
        id=agent_id, role="orchestrator", cls_path="x", project="p", status=status
    )
    state = {"phase": "iterating", "budget": {"gpu_hours": 0.0005, "on_cap": "hold_runs"}}
    if approval is not None:
        state["approval"] = approval
    ResearchLoop.objects.create(agent=agent, goal=f"goal of {agent_id}", settings={}, state=state)
    return agent_id


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user("ada", password="pw-1234567")


@pytest.fixture
def web(tmp_path):
    server = Web(AGENTSYS_WORKDIR=str(tmp_path))
    yield server
    server.stop()


def _call(url: str, token: str, calls: list[tuple[str, dict]]) -> list:
    """Each (tool, arguments) in one session over /mcp, as results (errors not raised)."""

    async def go():
        transport = StreamableHttpTransport(url, headers={"Authorization": f"Bearer {token}"})
        async with Client(transport) as client:
            return [await client.call_tool(t, a, raise_on_error=False) for t, a in calls]

    return asyncio.run(go())


def _error(result) -> str:
    assert result.is_error, result.structured_content
    return result.content[0].text


def _approvals_of(loop_id: str) -> list[dict]:
    entries = MemoryEntry.objects.filter(target_id=loop_id, type="message", tags=["approval"])
    return [entry.data["approve"] for entry in entries]


def test_a_person_lists_and_approves_loops_waiting_and_is_told_why_not(web, user):
    at_cap = _loop("orchestrator-at-cap", approval=AT_CAP)
    batch = _loop("orchestrator-batch", approval=BATCH)
    busy = _loop("orchestrator-busy")  # running, waiting for nothing
    ended = _loop("orchestrator-ended", status="done", approval=AT_CAP)  # its ask is moot now
    _, token = accounts.create_token(user=user, name="ide")

    listed, *refusals = _call(
        f"{web.url}/mcp",
        token,
        [
            ("list_approvals", {}),
            ("approve_research", {"loop_id": busy, "add": {"gpu_hours": 1}}),
            ("approve_research", {"loop_id": ended, "add": {"gpu_hours": 1}}),
            ("approve_research", {"loop_id": at_cap, "add": {"dollars": 5}}),
            ("approve_research", {"loop_id": at_cap, "add": {"gpu_hours": -1}}),
            ("approve_research", {"loop_id": at_cap}),  # at a cap an amount is needed
            ("approve_research", {"loop_id": "orchestrator-none", "add": {"gpu_hours": 1}}),
        ],
    )
    waiting = {item["loop_id"]: item for item in listed.structured_content["result"]}
    assert set(waiting) == {at_cap, batch}
    assert waiting[at_cap]["kind"] == "cap"
    assert waiting[at_cap]["reason"].startswith("its gpu_hours cap is reached: 0.0006 spent")
    assert waiting[at_cap]["cap"] == {"gpu_hours": 0.0005}
    assert waiting[at_cap]["spent"] == {"gpu_hours": 0.0006, "llm_tokens": 10}
    assert waiting[batch]["kind"] == "batch" and waiting[batch]["expected_gpu_hours"] == 0.25
    assert waiting[batch]["batch"][0]["command"] == "python train.py --lr 0.2"

    not_busy, not_ended, no_cap, below_zero, no_amount, unknown = map(_error, refusals)
    assert f"{busy} is not waiting for an approval (running)" in not_busy
    assert f"{ended} is not waiting for an approval (done)" in not_ended
    assert "'dollars' is no cap; the caps are" in no_cap
    assert (
        "approve_research refused: add.gpu_hours" in below_zero and "greater than 0" in below_zero
    )
    assert "add: name what to add to which cap" in no_amount
    assert "No research loop 'orchestrator-none'" in unknown
    assert all(_approvals_of(loop) == [] for loop in (at_cap, batch, busy, ended))

    approved = _call(
        f"{web.url}/mcp/",
        token,
        [
            ("approve_research", {"loop_id": at_cap, "add": {"gpu_hours": 1}}),
            ("approve_research", {"loop_id": batch}),
        ],
    )
    assert [result.is_error for result in approved] == [False, False], approved
    assert approved[0].structured_content["added"] == {"gpu_hours": 1}
    assert "caps are raised" in approved[0].structured_content["detail"]
    # Each loop's inbox holds the approval it reads within a second.
    assert _approvals_of(at_cap) == [{"gpu_hours": 1.0}]
    assert _approvals_of(batch) == [{}]


def test_a_loops_own_token_may_not_approve_its_spending(web):
    at_cap = _loop("orchestrator-at-cap", approval=AT_CAP)
    _, token = accounts.issue_agent_token(agent_id=at_cap)

    listed, refused = _call(
        f"{web.url}/mcp",
        token,
        [
            ("list_approvals", {}),  # reading is what a loop's token may do
            ("approve_research", {"loop_id": at_cap, "add": {"gpu_hours": 100}}),
        ],
    )

    assert [item["loop_id"] for item in listed.structured_content["result"]] == [at_cap]
    assert "AgentSys refused (403): An agent's token may" in _error(refused)
    assert _approvals_of(at_cap) == []


def test_only_a_persons_server_has_approval_tools_never_the_research_agents(tmp_path, user):
    """The research-agent server started as OpenCode starts it (its opencode.json entry) has
    the run tools and no approval tool; `manage.py mcp` has both."""
    _, token = accounts.create_token(user=user, name="ide")
    entry = server_entries(tmp_path, slurm=False)["research-agent"]
    env = child_env(
        DATABASE_URL=database_url_of_current_connection(),
        AGENTSYS_API_TOKEN=token,
        AGENTSYS_WORKDIR=str(tmp_path),
        LOG_LEVEL="WARNING",
    )
    # No fixed token: as under a research loop, the run tools read the loop's credentials.
    agents_env = {**env, **entry["environment"]}
    agents_env.pop("AGENTSYS_API_TOKEN")
    agents = StdioTransport(command=entry["command"][0], args=entry["command"][1:], env=agents_env)
    persons = StdioTransport(
        command=sys.executable, args=["manage.py", "mcp"], env=env, cwd=str(REPO)
    )

    async def names(transport) -> set[str]:
        async with Client(transport) as client:
            return {tool.name for tool in await client.list_tools()}

    agents_tools, persons_tools = asyncio.run(names(agents)), asyncio.run(names(persons))
    assert {"create_run", "quick_bash"} <= agents_tools
    assert not {"approve_research", "list_approvals"} & agents_tools
    assert not any("approv" in name for name in agents_tools)
    assert {"approve_research", "list_approvals", "create_run"} <= persons_tools
    assert "quick_bash" not in persons_tools
