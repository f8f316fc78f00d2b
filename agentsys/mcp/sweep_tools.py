"""The sweep tools of AgentSys's MCP servers: make a sweep (with early stopping across its
runs, agentsys.asha, and stop rules its runs inherit) and read its rungs, through AgentSys's
REST API like the run tools (agentsys.mcp.run_tools), so each does and refuses exactly what
POST /api/sweeps and GET /api/sweeps/{id}/rungs do."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastmcp import FastMCP
from pydantic import Field

from agentsys.mcp.run_tools import STOP_WHEN, AgentSysAPI, Env

SWEEP = Annotated[str, Field(min_length=1, max_length=40, pattern=r"^[A-Za-z0-9_-]+$")]
EARLY_STOP = Annotated[
    dict[str, Any] | None,
    Field(
        description='ASHA across its runs, e.g. {"type": "asha", "metric": "loss", "mode": '
        '"min", "grace_steps": 1, "reduction": 3, "max_steps": 81}: at each rung '
        "(grace_steps·reduction^k steps) a run goes on only if it is in the top 1/reduction "
        "of the runs that reached the rung before it; the others end stopped, saying the "
        "rung and its cut-off. max_steps: the steps a run trains to in full",
    ),
]


def add_sweep_tools(server: FastMCP, api: AgentSysAPI) -> None:
    @server.tool
    async def create_sweep(
        name: Annotated[str, Field(min_length=1, max_length=200)],
        goal: Annotated[str, Field(max_length=5000)] = "",
        early_stop: EARLY_STOP = None,
        stop_when: STOP_WHEN = None,
        metrics_pattern: Annotated[str, Field(max_length=1000)] = "",
        env: Env | None = None,
        venv: Annotated[str, Field(max_length=1000)] = "",
        backend: Literal["subprocess", "slurm"] | None = None,
    ) -> dict:
        """Make a sweep for runs to join (create_run/create_runs with its `sweep_id`): its
        runs inherit its stop rules, env, venv and metrics_pattern unless they bring their
        own, and `early_stop` prunes the losing ones as they reach each rung."""
        body = {
            "name": name,
            "goal": goal,
            "early_stop": early_stop,
            "stop_when": stop_when,
            "metrics_pattern": metrics_pattern or None,
            "env": env,
            "venv": venv or None,
            "backend": backend,
        }
        body = {key: value for key, value in body.items() if value is not None}
        return await api.call("POST", "/api/sweeps", json=body)

    @server.tool
    async def get_sweep_rungs(sweep_id: SWEEP) -> dict:
        """A sweep's early-stopping rungs: the runs that reached each (value, kept or
        stopped, the cut-off each was judged by) and the GPU-hours its stops saved."""
        return await api.call("GET", f"/api/sweeps/{sweep_id}/rungs")
