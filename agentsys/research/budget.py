"""A loop's budget: caps on what it spends, checked before every model call and before every
batch of experiments (issue 38 §2).

- The caps: `llm_tokens` (every token a step paid for: input, output, reasoning, cache read and
  write), `llm_usd` (what the provider charged, as OpenCode prices it), `gpu_hours` (its runs'
  GPUs times the time they held them) and `wall_hours` (since the loop started). Each is optional.
- What it spent: the ledger's sums for the loop (ledger_app, through the run port), and for
  the model, at least what the loop's own replies reported (the ledger's row of the last step
  may not be written yet when the next check comes): the overshoot is at most one model call
  and the runs already started.
- With `on_cap: "stop_runs"` the loop also watches its caps while its experiments run
  (every WATCH_SECONDS) and stops them at a cap (`stop_runs_at_cap`); with "hold_runs"
  (the default) runs already going on finish.
- At a cap the loop asks nothing and starts nothing: it saves `approval` {reason, cap, spent}
  in its state (its state says `awaiting_approval`), tells the person (an event, an alert, its
  log) and waits, pause-aware and stop-cancellable, for an approval in its inbox (`POST
  /api/research/{id}/approve`, research_app.approvals): the amounts it adds raise the caps and
  the loop goes on. Spent totals never reset; an approval adds to the cap.
- Defaults: a chat session and a person may each set a default budget; a loop gets the
  tightest of its own, its chat's and its person's (`tightest`).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from typing import Any

logger = logging.getLogger("agentsys.research")

CAPS = ("llm_tokens", "llm_usd", "gpu_hours", "wall_hours")
ON_CAP = ("hold_runs", "stop_runs")
APPROVAL_POLL_SECONDS = 1.0
WATCH_SECONDS = 2.0  # how often a stop_runs budget looks at its caps while runs go on
APPROVAL_SIGNATURE = "budget"  # its alert's


def checked(raw) -> dict:
    """The budget of a loop's config: {cap: number >= 0, ..., "on_cap"}; TypeError or
    ValueError saying what is wrong."""
    if raw in (None, {}):
        return {}
    if not isinstance(raw, dict):
        raise TypeError(f"budget must be an object, got {raw!r}")
    unknown = set(raw) - {*CAPS, "on_cap"}
    if unknown:
        raise ValueError(f"budget has no {', '.join(sorted(unknown))}; its caps are {CAPS}")
    budget = {}
    for name in CAPS:
        value = raw.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
            raise ValueError(f"budget {name} must be a number >= 0, got {value!r}")
        if not math.isfinite(value):
            raise ValueError(f"budget {name} must be finite")
        budget[name] = float(value)
    on_cap = raw.get("on_cap") or "hold_runs"
    if on_cap not in ON_CAP:
        raise ValueError(f"budget on_cap must be one of {', '.join(ON_CAP)}, got {on_cap!r}")
    return {**budget, "on_cap": on_cap} if budget else {}


def tightest(sources: dict[str, dict | None]) -> tuple[dict, dict[str, str]]:
    """The budget that applies where several set one ("the tightest applies", issue 38 §2):
    `sources` maps where each comes from ("loop", "session", "person") to a budget
    (`checked` checks it; None or {} sets nothing). Per cap the smallest of those that set
    it, the first named winning a tie; on_cap "stop_runs" if any says so. Returns the budget
    (as `checked` writes it) and {cap: the source its value came from}, on_cap included
    when a source asked to stop runs."""
    caps: dict[str, float] = {}
    came_from: dict[str, str] = {}
    for source, raw in sources.items():
        try:
            budget = checked(raw)
        except (TypeError, ValueError) as error:
            raise type(error)(f"{source}'s {error}") from None
        for name in CAPS:
            if name in budget and (name not in caps or budget[name] < caps[name]):
                caps[name], came_from[name] = budget[name], source
        if budget.get("on_cap") == "stop_runs" and "on_cap" not in came_from:
            came_from["on_cap"] = source
    if not caps:
        return {}, {}
    on_cap = "stop_runs" if "on_cap" in came_from else "hold_runs"
    return {**caps, "on_cap": on_cap}, came_from


def reached(caps: dict, spent: dict) -> tuple[str, float, float] | None:
    """The first cap spent up to: (its name, the cap, what was spent)."""
    for name in CAPS:
        if name in caps and spent.get(name, 0.0) >= caps[name]:
            return name, caps[name], spent.get(name, 0.0)
    return None


def left_words(caps: dict, spent: dict) -> str:
    """What is left of each cap, for the prompt: the model plans with it."""
    lines = []
    for name in CAPS:
        if name in caps:
            left = max(caps[name] - spent.get(name, 0.0), 0.0)
            lines.append(f"- {name}: {_number(left)} left of {_number(caps[name])}")
    return "\n".join(lines)


def _number(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.4g}"


def add_model_steps(state, steps: list[dict]) -> None:
    """What the loop's own replies reported paying (the ledger has the same steps)."""
    own = state.spent_model
    for step in steps:
        tokens = sum(
            int(step.get(key) or 0)
            for key in (
                "input_tokens",
                "output_tokens",
                "reasoning_tokens",
                "cache_read_tokens",
                "cache_write_tokens",
            )
        )
        own["llm_tokens"] = own.get("llm_tokens", 0) + tokens
        own["llm_usd"] = own.get("llm_usd", 0.0) + float(step.get("usd") or 0.0)


async def spent_now(agent: Any) -> dict:
    """{llm_tokens, llm_usd, gpu_hours, wall_hours} the loop has spent so far."""
    state = agent.state
    try:
        ledger = await agent.in_runs("loop_spent", loop_id=agent.id) or {}
    except Exception:  # the database away: its own count of the model still holds
        logger.exception("%s: could not read its spending", agent.id)
        ledger = {}
    own = state.spent_model
    return {
        "llm_tokens": max(ledger.get("llm_tokens", 0), own.get("llm_tokens", 0)),
        "llm_usd": max(ledger.get("llm_usd", 0.0), own.get("llm_usd", 0.0)),
        "gpu_hours": ledger.get("gpu_hours", 0.0),
        "wall_hours": max(time.time() - state.started_at, 0.0) / 3600,
    }


async def hold_at_cap(agent: Any, before: str) -> None:
    """Before `before` (a model call, a batch of experiments): while a cap is reached, wait
    for a person's approval (the module docstring)."""
    state = agent.state
    caps = {k: v for k, v in state.budget.items() if k in CAPS}
    while caps:
        spent = await spent_now(agent)
        hit = reached(caps, spent)
        if hit is None:
            return
        if not state.approval:
            await _ask_approval(agent, hit, spent, before)
        added = await approval_in_inbox(agent)
        if added is not None:  # adding too little: it asks again at once
            for name, amount in added.items():
                state.budget[name] = caps[name] = caps.get(name, 0.0) + amount
            agent.emit_event("approved", {"added": added, "caps": caps})
            agent._log_control("Budget raised by the researcher", str(added))
            state.approval = {}
            agent._save()
            continue
        await agent.check_pause()
        await asyncio.sleep(APPROVAL_POLL_SECONDS)


async def stop_runs_at_cap(agent: Any, child_ids: list[str]) -> None:
    """While its experiments run: at a cap, stop those still running (on_cap stop_runs).
    The loop then waits for an approval before its next model call, as at any cap."""
    caps = {k: v for k, v in agent.state.budget.items() if k in CAPS}
    if not caps or agent.state.budget.get("on_cap") != "stop_runs":
        return
    while True:
        await asyncio.sleep(WATCH_SECONDS)
        spent = await spent_now(agent)
        hit = reached(caps, spent)
        if hit is None:
            continue
        going = [agent.children[i] for i in child_ids if i in agent.children]
        going = [handle for handle in going if not handle.status.is_terminal]
        if going:
            name, cap, value = hit
            reason = f"its {name} cap is reached ({_number(value)} of {_number(cap)})"
            agent.emit_event("budget_stopped_runs", {"reason": reason, "runs": len(going)})
            agent._log_control("Budget cap reached: its running experiments stopped", reason)
            for handle in going:
                await handle.cancel()
        return


async def _ask_approval(agent: Any, hit: tuple, spent: dict, before: str) -> None:
    name, cap, value = hit
    reason = (
        f"its {name} cap is reached: {_number(value)} spent of {_number(cap)}; it waits "
        f"for your approval before {before}"
    )
    agent.state.approval = {
        "kind": "cap",
        "reason": reason,
        "cap": {name: cap},
        "spent": spent,
        "asked_at": time.time(),
    }
    agent.emit_event("awaiting_approval", {"reason": reason, "cap": {name: cap}, "spent": spent})
    agent._log_control("Budget cap reached: waiting for approval", reason)
    try:
        await agent.alert(
            "warning", f"The research loop {reason}", APPROVAL_SIGNATURE, {"loop": agent.id}
        )
    except Exception:  # the event, the page and the API still say it
        logger.exception("%s: could not raise the budget alert", agent.id)
    agent._save()


def is_approval(entry) -> bool:
    """A person's approval (research_app.approvals): its data holds `approve`."""
    return isinstance(entry.data, dict) and isinstance(entry.data.get("approve"), dict)


def answers_open_question(entry, approval: dict) -> bool:
    """Does this approval answer the question the loop asks now? An approval names the
    question it answers by its `asked_at`; one sent for an earlier question (two people
    approving at once, or a second click as the loop goes on) must not approve the next cap
    or batch unseen. An approval naming none (sent before approvals named theirs) counts."""
    answers = entry.data.get("answers")
    if answers is None:
        return True
    asked_at = approval.get("asked_at")
    return (
        isinstance(answers, int | float)
        and isinstance(asked_at, int | float)
        and (abs(answers - asked_at) < 1e-3)
    )


async def approval_in_inbox(agent: Any) -> dict | None:
    """The amounts the approvals of its open question add (summed; their entries
    acknowledged): {} for an approval that adds nothing (a batch's), None when none came.
    An approval of an earlier question is acknowledged and logged, not used."""
    try:
        entries = await agent.in_memory("read_inbox") or []
    except Exception:  # the database away: keep waiting
        logger.exception("%s: could not look for an approval", agent.id)
        return None
    added: dict[str, float] | None = None
    for entry in entries:
        if not is_approval(entry):
            continue
        if not answers_open_question(entry, agent.state.approval or {}):
            agent._log_control(
                "An approval came for a question already answered: not used",
                str(entry.data.get("approve")),
            )
            await agent.in_memory("ack", key=entry.key)
            continue
        added = added if added is not None else {}
        for name, amount in entry.data["approve"].items():
            if name in CAPS and isinstance(amount, int | float) and amount >= 0:
                added[name] = added.get(name, 0.0) + float(amount)
        await agent.in_memory("ack", key=entry.key)
    return added
