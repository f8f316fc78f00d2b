"""Approvals by autonomy level (issue 38 §3): before a batch of experiments starts, the loop
asks a person when its `autonomy_level` says so.

- `cautious`: before every batch.
- `balanced`: when the batch needs more than `approval_gpus` GPUs in all, or would pass its
  GPU-hour cap by what it is expected to take.
- `full`: never (its caps still hold: agentsys.research.budget).

The loop saves `approval` {kind "batch", reason, batch (each experiment's goal, command and
GPUs), expected_gpu_hours} in its state (its state says `awaiting_approval`), tells the
person and waits for the approval in its inbox, as at a budget cap; an approval nobody gives
within `approval_timeout_s` stops the loop, saying why. The expected GPU-hours are the
batch's GPUs times the mean time its earlier batches ran (unknown before the first).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from agentsys.research import budget

logger = logging.getLogger("agentsys.research")

SIGNATURE = "approval"  # the alert of a batch waiting for approval


def expected_gpu_hours(specs: list, history: list[dict]) -> float | None:
    ran = [h["experiments_s"] for h in history if h.get("runs") and h.get("experiments_s")]
    if not ran:
        return None
    return sum(s.gpu_required for s in specs) * (sum(ran) / len(ran)) / 3600


def why_ask(level: str, specs: list, *, gpus_allowed: int, expected, gpu_left) -> str:
    """Why this batch needs a person's approval ("" when it does not)."""
    gpus = sum(s.gpu_required for s in specs)
    if level == "cautious":
        return (
            f"autonomy_level cautious: every batch waits for you ({len(specs)} runs, {gpus} GPUs)"
        )
    if level != "balanced":
        return ""
    if gpus > gpus_allowed:
        return f"the batch needs {gpus} GPUs, more than the {gpus_allowed} it may take unasked"
    if expected is not None and gpu_left is not None and expected > gpu_left:
        return (
            f"the batch is expected to take {expected:.3g} GPU-hours, more than the "
            f"{gpu_left:.3g} left of its cap"
        )
    return ""


async def hold_for_approval(agent: Any, specs: list) -> None:
    """Before launching `specs`: ask and wait when the autonomy level says so."""
    state, settings = agent.state, agent.settings
    if not specs:
        return
    if not state.approval:
        expected = expected_gpu_hours(specs, state.history)
        gpu_left = None
        if "gpu_hours" in state.budget:
            spent = await budget.spent_now(agent)
            gpu_left = max(state.budget["gpu_hours"] - spent["gpu_hours"], 0.0)
        reason = why_ask(
            settings.autonomy_level,
            specs,
            gpus_allowed=settings.approval_gpus,
            expected=expected,
            gpu_left=gpu_left,
        )
        if not reason:
            return
        await _ask(agent, specs, reason, expected)
    elif state.approval.get("kind") != "batch":
        return
    await _wait(agent)


async def _ask(agent: Any, specs: list, reason: str, expected: float | None) -> None:
    batch = [{"goal": s.goal, "command": s.command, "gpu_required": s.gpu_required} for s in specs]
    agent.state.approval = {
        "kind": "batch",
        "reason": reason,
        "batch": batch,
        "expected_gpu_hours": expected,
        "asked_at": time.time(),
    }
    agent.emit_event("awaiting_approval", {"reason": reason, "batch": len(batch)})
    agent._log_control("Waiting for approval of its next experiments", reason)
    try:
        await agent.alert(
            "warning",
            f"The research loop waits for approval: {reason}",
            SIGNATURE,
            {"loop": agent.id},
        )
    except Exception:  # the event, the page and the API still say it
        logger.exception("%s: could not raise the approval alert", agent.id)
    agent._save()


async def _wait(agent: Any) -> None:
    state = agent.state
    deadline = state.approval.get("asked_at", time.time()) + agent.settings.approval_timeout_s
    while await budget.approval_in_inbox(agent) is None:
        if time.time() >= deadline:
            reason = (
                f"no approval came within {agent.settings.approval_timeout_s:g} s for "
                f"{len(state.approval.get('batch') or [])} experiments: the loop stops"
            )
            agent.emit_event("approval_timeout", {"reason": reason})
            agent._log_control("Stopped: no approval came", reason)
            state.approval = {}
            agent._save()
            await agent.stop()
            await asyncio.sleep(3600)  # the stop cancels this task
        await agent.check_pause()
        await asyncio.sleep(budget.APPROVAL_POLL_SECONDS)
    agent.emit_event("approved", {"batch": len(state.approval.get("batch") or [])})
    agent._log_control("Its next experiments approved by the researcher")
    state.approval = {}
    agent._save()
