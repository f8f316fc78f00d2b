"""`wait_runs` (issue 39 §3): wait on several runs, or a sweep's, until a condition holds,
through POST /api/runs/wait with the caller's token (the web holds the wait: one LISTEN
connection for all of them, no thread or database connection each; scheduler_app.run_waits).

Unlike wait_run, which polls one run for its end, this one returns within a moment of the news
that meets the condition (a metric row stored, a status moved, an alert raised)."""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from pydantic import Field

from agentsys.mcp.run_tools import RUN_ID, AgentSysAPI
from agentsys.run_waits import BadCondition, parse_until

MAX_WAIT_S = 3600.0
MAX_RUNS = 1000
ANSWER_MARGIN_S = 30.0  # the HTTP call's own timeout: the wait's, and this for the answer

UNTIL = Annotated[
    Any,
    Field(
        description='What to wait for: "any_ended", "all_ended", "failed" (a run failed or was '
        'lost), "alert" (an alert raised on a run while waiting), {"metric": "loss", '
        '"below": 0.1} or {"metric": "loss", "above": 3} (a run\'s last stored value of that '
        "metric), or a list of these (the first that holds)",
    ),
]


def add_wait_tools(server: FastMCP, api: AgentSysAPI) -> None:
    """Register wait_runs on `server`."""

    @server.tool
    async def wait_runs(
        until: UNTIL,
        run_ids: Annotated[list[RUN_ID] | None, Field(max_length=MAX_RUNS)] = None,
        sweep_id: Annotated[str, Field(max_length=40)] = "",
        timeout_s: Annotated[float, Field(gt=0, le=MAX_WAIT_S)] = 300.0,
    ) -> dict:
        """Wait on runs (`run_ids`, or every run of `sweep_id`, not both) until `until` holds
        or `timeout_s` pass (at most 3600; inside OpenCode, whose MCP calls end at 330 s, at most
        300), and return at once when it holds already.
        Conditions: "any_ended", "all_ended", "failed", "alert" (raised while waiting),
        {"metric": "loss", "below": 0.1} / {"metric": "loss", "above": 3} (the run's last
        stored value), or a list of them (the first that holds wakes it). The answer: `woke`
        (false: the timeout came first), `reason` in words (e.g. "run r-1 (lr-3e-4) reached
        loss 0.08 at step 400 (loss below 0.1)"), `condition` and `run_id` (which held, for
        which run; null for all_ended), `waited_s`, and `runs`: each run's status, exit code
        and the last value and step of each metric."""
        until = _decoded(until)
        if bool(run_ids) == bool(sweep_id):
            raise ToolError("wait_runs refused: give run_ids or sweep_id, one of them")
        try:
            parse_until(until)  # refused here, in the same words, before any call
        except BadCondition as bad:
            raise ToolError(f"wait_runs refused: {bad}") from None
        body = {"until": until, "timeout_s": timeout_s}
        body.update({"run_ids": run_ids} if run_ids else {"sweep_id": sweep_id})
        return await api.call(
            "POST", "/api/runs/wait", json=body, timeout=timeout_s + ANSWER_MARGIN_S
        )


def _decoded(until: Any) -> Any:
    """A condition a model sent as JSON text ('{"metric": "loss", "below": 0.1}'), as the
    object it meant; anything else as it came."""
    if isinstance(until, str) and until.strip()[:1] in ("{", "["):
        try:
            return json.loads(until)
        except ValueError:
            return until
    return until
