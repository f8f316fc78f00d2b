"""A person's approvals over MCP (issue 38 §3): the loops waiting for one, and the approval
itself, through the REST API (`GET /api/research?state=awaiting_approval`, `POST
/api/research/{id}/approve`) with the caller's token, so a tool checks and refuses exactly as
the API does.

Only for the servers outside clients get (`manage.py mcp`, `/mcp`): never on the research-agent
server OpenCode's model reads, since a loop must not approve its own spending (the API refuses
an agent's token here as well, common/api_contract.AGENT_WRITES, and says so as a tool error).
"""

from __future__ import annotations

from typing import Annotated

from fastmcp import FastMCP
from pydantic import Field

from agentsys.mcp.run_tools import AgentSysAPI

LOOP_ID = Annotated[str, Field(min_length=1, max_length=80, pattern=r"^[A-Za-z0-9_.:-]+$")]
# A name that is no cap is the API's to refuse, naming the caps (agentsys.research.budget,
# which imports this package: not imported here); an amount not above 0 is refused here
# already, naming its cap.
AMOUNTS = Annotated[
    dict[str, Annotated[float, Field(gt=0, allow_inf_nan=False)]] | None,
    Field(
        description='What to add to which cap, e.g. {"gpu_hours": 1} (the caps: llm_tokens, '
        "llm_usd, gpu_hours, wall_hours); spent is never reset. Leave it out to let a batch "
        "waiting for approval start."
    ),
]
MAX_LISTED = 500  # GET /api/research's own page limit


def add_approval_tools(server: FastMCP, api: AgentSysAPI) -> None:
    """Register list_approvals and approve_research on `server` (a person's server only)."""

    @server.tool
    async def list_approvals(limit: Annotated[int, Field(ge=1, le=MAX_LISTED)] = 50) -> list[dict]:
        """Research loops waiting for your approval, newest first: at a budget cap (kind
        "cap": its reason, the cap and what it spent) or before a batch of experiments (kind
        "batch": the planned runs and their expected GPU hours). Approve one with
        approve_research."""
        query = {"state": "awaiting_approval", "limit": limit}
        loops = await api.call("GET", "/api/research", params=query)
        return [_waiting(loop) for loop in loops if loop.get("approval")]

    @server.tool
    async def approve_research(loop_id: LOOP_ID, add: AMOUNTS = None) -> dict:
        """Approve a research loop waiting for it (list_approvals): at a cap, `add` raises its
        caps by these amounts and it goes on; a batch needs no amounts. A loop not waiting,
        or an amount that is no cap or not above 0, is refused, saying why."""
        body = {"add": add or {}}
        answer = await api.call("POST", f"/api/research/{loop_id}/approve", json=body)
        return {"loop_id": loop_id, "added": add or {}, "detail": answer.get("detail", "")}


def _waiting(loop: dict) -> dict:
    """One waiting loop, as a person deciding needs it."""
    approval = loop["approval"]
    waiting = {
        "loop_id": loop["id"],
        "goal": loop.get("goal", ""),
        "kind": approval.get("kind") or "cap",
        "reason": approval.get("reason", ""),
        "budget": loop.get("budget"),
    }
    keys = ("cap", "spent", "batch", "expected_gpu_hours")
    waiting.update({key: approval[key] for key in keys if approval.get(key) is not None})
    return waiting
