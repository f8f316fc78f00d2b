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
import os
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


Params = dict[str, str | int | float | bool]
Env = dict[str, str | int | float | bool]
Requires = dict[str, str | int | float]
GPUS = Annotated[int, Field(ge=0, le=1024, description="GPUs it needs (0: a CPU run)")]
WORKDIR = Annotated[
    str,
    Field(max_length=1000, description="Where it runs: absolute, or relative to the server's"),
]
VENV = Annotated[
    str,
    Field(
        max_length=1000,
        description="Its virtual environment (relative to its workdir, or absolute); "
        "empty: the workdir's .venv/ when it has one",
    ),
]
SWEEP_ID = Annotated[str, Field(max_length=40, description="Its sweep; empty: this agent's")]
STOP_WHEN = Annotated[
    list[dict[str, Any]] | None,
    Field(
        max_length=50,
        description='Stop rules, e.g. [{"metric": "loss", "above": 2.0, "after_step": 100}, '
        '{"metric": "loss", "nan": true}, {"metric": "val_loss", "no_improvement_steps": 500, '
        '"mode": "min", "min_delta": 0.001}, {"wall_seconds": 3600}]: the first met stops '
        "the run, its stopped_by saying which; unset: its sweep's",
    ),
]


class RunSpec(BaseModel):
    """One run of create_runs: what create_run takes (the names of POST /api/runs)."""

    model_config = ConfigDict(extra="forbid")

    name: Annotated[str, Field(min_length=1, max_length=200)]
    command: Annotated[str, Field(min_length=1, max_length=20_000)]
    params: Params | None = None
    gpu_required: GPUS = 0
    workdir: WORKDIR = ""
    env: Env | None = None
    venv: VENV = ""
    requires: Requires | None = None
    sweep_id: SWEEP_ID = ""
    stop_when: STOP_WHEN = None


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
    server: FastMCP,
    api: AgentSysAPI,
    *,
    sweep_id: str | Callable[[], str] = "",
    workdir: str = "",
) -> None:
    """Register the run tools on `server`; runs it creates join `sweep_id` (or `sweep_id()`,
    read at each call) and run in `workdir` (the server's) unless told. Their arguments are
    POST /api/runs's, by the same names."""

    def run_body(spec: RunSpec) -> dict:
        body = spec.model_dump(exclude_none=True, exclude_defaults=True)
        body.setdefault("gpu_required", 0)
        if spec.workdir or workdir:
            body["workdir"] = _in(workdir, spec.workdir)
        return body

    async def own_sweep(body: dict) -> dict:
        if not body.get("sweep_id") and (sweep := _now(sweep_id)):
            body["sweep_id"] = sweep
        return body

    @server.tool
    async def create_run(
        name: Annotated[str, Field(min_length=1, max_length=200)],
        command: Annotated[str, Field(min_length=1, max_length=20_000)],
        params: Params | None = None,
        gpu_required: GPUS = 0,
        workdir: WORKDIR = "",
        env: Env | None = None,
        venv: VENV = "",
        requires: Requires | None = None,
        sweep_id: SWEEP_ID = "",
        stop_when: STOP_WHEN = None,
        auto_start: bool = False,
    ) -> dict:
        """Make a run of `command` (params appended as --key=value), as POST /api/runs does;
        `auto_start` queues it at once. `env`: its environment variables; `requires`: host
        labels it needs (a number is a minimum, e.g. {"gpu_memory_gb": 40}); `stop_when`: the
        rules that stop it early (a diverging loss, NaN, no improvement, a time). Unless told,
        it joins this agent's sweep and runs in this server's workdir."""
        spec = RunSpec(
            name=name,
            command=command,
            params=params,
            gpu_required=gpu_required,
            workdir=workdir,
            env=env,
            venv=venv,
            requires=requires,
            sweep_id=sweep_id,
            stop_when=stop_when,
        )
        body = await own_sweep({**run_body(spec), "auto_start": auto_start})
        return _run_summary(await api.call("POST", "/api/runs", json=body))

    @server.tool
    async def create_runs(
        runs: Annotated[list[RunSpec], Field(min_length=1, max_length=MAX_BATCH)],
        auto_start: bool = False,
        sweep_id: SWEEP_ID = "",
        env: Annotated[Env | None, Field(description="Every run's, under its own env")] = None,
        stop_when: STOP_WHEN = None,
    ) -> list[dict]:
        """Make many runs in one call (up to 1,000), all of them or none, as POST
        /api/runs/batch does: a bad one is named by its index. `auto_start` queues them at
        once, in the list's order. Unless told, they join this agent's sweep."""
        body = {"runs": [run_body(run) for run in runs], "auto_start": auto_start}
        if sweep_id:
            body["sweep_id"] = sweep_id
        if env:
            body["env"] = env
        if stop_when is not None:  # the runs' that bring none
            body["stop_when"] = stop_when
        body = await own_sweep(body)
        return [_run_summary(run) for run in await api.call("POST", "/api/runs/batch", json=body)]

    @server.tool
    async def start_run(run_id: RUN_ID) -> dict:
        """Queue a run that was made but not started."""
        return _run_summary(await api.call("POST", f"/api/runs/{run_id}/start"))

    @server.tool
    async def stop_run(run_id: RUN_ID) -> dict:
        """Stop a run now (its processes end, its GPUs are freed; it ends `stopped`): one
        that diverges or goes nowhere, so the budget goes to a better one. A research loop
        may stop only its own runs."""
        return _run_summary(await api.call("POST", f"/api/runs/{run_id}/stop"))

    @server.tool
    async def list_runs(
        sweep_id: Annotated[str, Field(max_length=40)] = "",
        status: Annotated[str, Field(max_length=20)] = "",
        limit: Annotated[int, Field(ge=1, le=200)] = 50,
    ) -> list[dict]:
        """Runs, newest first, of a sweep and/or with a status (GET /api/runs)."""
        query = {"limit": limit, **({"sweep_id": sweep_id} if sweep_id else {})}
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


def _in(base: str, workdir: str) -> str:
    """`workdir` as the API takes it: a relative one is the server's workdir's."""
    if not workdir:
        return base
    return workdir if os.path.isabs(workdir) or not base else os.path.join(base, workdir)


def _run_summary(run: dict) -> dict:
    keys = ("id", "name", "status", "exit_code", "error", "gpu_required", "sweep_id")
    summary = {key: run.get(key) for key in keys if key in run}
    extra = ("stopped_by", "wait_reason", "slurm_job_id", "params")
    summary.update({key: run[key] for key in extra if run.get(key)})
    return summary
