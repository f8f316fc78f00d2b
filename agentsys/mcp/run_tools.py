"""The run tools of AgentSys's MCP servers (issue 23, parts 1 and 4): create (one or a batch,
issue 25), start, list, read, tail and wait for runs, and search memory, through AgentSys's own
REST API with a token, so a tool does exactly what the API does for a script (its checks, its
4xx in words).

What an agent that must not block needs: `wait_run` returns at the run's end or its timeout
(≤ 300 s), never later; `tail_run_log` reads at most the last 256 KiB. Every refusal, of the
tool or of the API, is a tool error saying why.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Annotated, Any

import httpx
from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from pydantic import BaseModel, ConfigDict, Field

LIVE = {"queued", "running", "paused"}
MAX_WAIT_S = 300.0
TAIL_BYTES = 256 * 1024
RUN_ID = Annotated[str, Field(min_length=1, max_length=40, pattern=r"^[A-Za-z0-9_-]+$")]


MAX_BATCH = 1000  # runs per POST /api/runs/batch


class RunSpec(BaseModel):
    """One run of create_runs: what create_run takes."""

    model_config = ConfigDict(extra="forbid")

    name: Annotated[str, Field(min_length=1, max_length=200)]
    command: Annotated[str, Field(min_length=1, max_length=20_000)]
    params: dict[str, str | int | float | bool] | None = None
    gpu_required: Annotated[int, Field(ge=0, le=1024)] = 0


class AgentSysAPI:
    """AgentSys's REST API with one token, or with `token()`, read at each call (a server
    that serves many callers: each call carries the caller's own; a research loop's server:
    the token of the loop running now). `base_url` likewise. `client` may be given
    (in-process ones, whose own base URL is used)."""

    def __init__(
        self,
        base_url: str | Callable[[], str],
        token: str | Callable[[], str],
        client: httpx.AsyncClient | None = None,
    ):
        self.client = client or httpx.AsyncClient(timeout=30.0)
        self.base_url, self.token = base_url, token

    async def call(self, method: str, path: str, **kwargs) -> Any:
        token = _now(self.token)
        url = _now(self.base_url).rstrip("/") + path
        headers = {"X-Auth-Token": token}
        try:
            response = await self.client.request(method, url, headers=headers, **kwargs)
        except httpx.HTTPError as error:
            raise ToolError(f"AgentSys did not answer at {path}: {error}") from None
        if response.status_code >= 400:
            try:
                detail = response.json().get("detail")
            except ValueError:
                detail = response.text[:500]
            raise ToolError(f"AgentSys refused ({response.status_code}): {detail}")
        return response.json()


def _now(value: str | Callable[[], str]) -> str:
    return value() if callable(value) else value


def add_run_tools(
    server: FastMCP, api: AgentSysAPI, *, sweep_id: str | Callable[[], str] = ""
) -> None:
    """Register the run tools on `server`; runs it creates join `sweep_id` (or `sweep_id()`,
    read at each call) unless told."""

    @server.tool
    async def create_run(
        name: Annotated[str, Field(min_length=1, max_length=200)],
        command: Annotated[str, Field(min_length=1, max_length=20_000)],
        params: dict[str, str | int | float | bool] | None = None,
        gpu_required: Annotated[int, Field(ge=0, le=1024)] = 0,
        start: bool = False,
    ) -> dict:
        """Make a run of `command` (params appended as --key=value); `start` queues it at
        once. It joins this agent's sweep."""
        body = {"name": name, "command": command, "gpu_required": gpu_required}
        body.update(params=params or {}, auto_start=start)
        if sweep := _now(sweep_id):
            body["sweep_id"] = sweep
        return _run_summary(await api.call("POST", "/api/runs", json=body))

    @server.tool
    async def create_runs(
        runs: Annotated[list[RunSpec], Field(min_length=1, max_length=MAX_BATCH)],
        start: bool = False,
    ) -> list[dict]:
        """Make many runs in one call (up to 1,000), all of them or none: a bad one is named
        by its index. `start` queues them at once, in the list's order. They join this
        agent's sweep."""
        body = {"runs": [run.model_dump(exclude_none=True) for run in runs], "auto_start": start}
        if sweep := _now(sweep_id):
            body["sweep_id"] = sweep
        return [_run_summary(run) for run in await api.call("POST", "/api/runs/batch", json=body)]

    @server.tool
    async def start_run(run_id: RUN_ID) -> dict:
        """Queue a run that was made but not started."""
        return _run_summary(await api.call("POST", f"/api/runs/{run_id}/start"))

    @server.tool
    async def list_runs(
        sweep: Annotated[str, Field(max_length=40)] = "",
        status: Annotated[str, Field(max_length=20)] = "",
        limit: Annotated[int, Field(ge=1, le=200)] = 50,
    ) -> list[dict]:
        """Runs, newest first, of a sweep and/or with a status."""
        query = {"limit": limit, **({"sweep_id": sweep} if sweep else {})}
        if status:
            query["status"] = status
        return [_run_summary(run) for run in await api.call("GET", "/api/runs", params=query)]

    @server.tool
    async def get_run(run_id: RUN_ID) -> dict:
        """A run's status, exit code, GPUs, error and the last value of each metric."""
        run = _run_summary(await api.call("GET", f"/api/runs/{run_id}"))
        # Two points a series: the last value comes with it, the rest is not wanted here.
        found = await api.call("GET", f"/api/runs/{run_id}/metrics", params={"max_points": 2})
        run["metrics"] = {
            s["key"]: {
                "last": s["last_value"],
                "step": s["last_step"],
                "min": s["min_value"],
                "max": s["max_value"],
                "points": s["points"],
            }
            for s in found["series"]
        }
        return run

    @server.tool
    async def tail_run_log(
        run_id: RUN_ID, lines: Annotated[int, Field(ge=1, le=2000)] = 50
    ) -> dict:
        """The last `lines` lines of the run's log (from at most its last 256 KiB)."""
        head = await api.call("GET", f"/api/runs/{run_id}/logs", params={"limit": 1})
        offset = max(0, head["size"] - TAIL_BYTES)
        chunk = await api.call(
            "GET", f"/api/runs/{run_id}/logs", params={"offset": offset, "limit": TAIL_BYTES}
        )
        text = chunk["text"].splitlines()[-lines:]
        return {"size": chunk["size"], "lines": text}

    @server.tool
    async def wait_run(
        run_id: RUN_ID, timeout_seconds: Annotated[float, Field(gt=0, le=MAX_WAIT_S)] = 60.0
    ) -> dict:
        """Wait until the run ends or `timeout_seconds` pass, whichever is first; returns its
        state then (`ended` says which)."""
        deadline = time.monotonic() + timeout_seconds
        while True:
            run = _run_summary(await api.call("GET", f"/api/runs/{run_id}"))
            left = deadline - time.monotonic()
            if run["status"] not in LIVE or left <= 0:
                return {**run, "ended": run["status"] not in LIVE}
            await asyncio.sleep(min(1.0, left))

    @server.tool
    async def search_memory(
        query: Annotated[str, Field(max_length=200)] = "",
        tag: Annotated[str, Field(max_length=64)] = "",
        limit: Annotated[int, Field(ge=1, le=100)] = 20,
    ) -> dict:
        """Reflections and lessons of earlier loops (the memory bank), newest first."""
        params = {"q": query, "limit": limit, **({"tag": tag} if tag else {})}
        return await api.call("GET", "/api/memories", params=params)


def _run_summary(run: dict) -> dict:
    keys = ("id", "name", "status", "exit_code", "error", "gpu_required", "sweep_id")
    summary = {key: run.get(key) for key in keys if key in run}
    summary.update(
        {key: run[key] for key in ("wait_reason", "slurm_job_id", "params") if run.get(key)}
    )
    return summary
