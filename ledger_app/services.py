"""Writes to the ledger. Each entry is inserted with ON CONFLICT DO NOTHING on its key, inside
the caller's transaction (the chat turn's close, the loop's saved state, the run's end): a
step recorded again after a restart stays one row, and one whose record was rolled back is
not in the ledger either."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from agents_app.models import Agent
from agentsys.types import AgentRole
from ledger_app.models import SpendEntry, SpendKind

TOKEN_FIELDS = (
    "input_tokens",
    "output_tokens",
    "reasoning_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
)


def cause_of_agent(agent_id: str) -> dict:
    """The loop, chat session and person behind a model step of agent `agent_id` (an L1 or
    an L2), read through foreign keys (the loop's row and the chat are apps above this one)."""
    row = (
        Agent.objects.filter(pk=agent_id)
        .values(
            "role",
            "chat_session_id",
            "chat_session__owner_id",
            "research_loop__sweep_id",
            "research_loop__sweep__created_by_id",
        )
        .first()
    )
    if row is None:
        return {"agent_id": agent_id}
    is_loop = row["role"] == AgentRole.RESEARCH
    return {
        "agent_id": agent_id,
        "loop_id": agent_id if is_loop else "",
        "sweep_id": row["research_loop__sweep_id"] or "",
        "chat_session_id": row["chat_session_id"] or "",
        "user_id": row["chat_session__owner_id"] or row["research_loop__sweep__created_by_id"],
    }


def record_llm_steps(
    *,
    steps: list[dict],
    agent_id: str = "",
    chat_session_id: str = "",
    user_id: int | None = None,
    chat_turn_id: str = "",
) -> None:
    """Record the paid model steps (agentsys.opencode.events.step_of) of a research loop's
    agent `agent_id`, or of a chat session's turn `chat_turn_id` (its person `user_id`)."""
    steps = [s for s in steps if isinstance(s, dict) and s.get("key")]
    if not steps:
        return
    if agent_id:
        cause = cause_of_agent(agent_id)
    else:
        cause = {"chat_session_id": chat_session_id, "user_id": user_id}
    entries = [
        SpendEntry(
            key=f"llm:{step['key']}"[:200],
            kind=SpendKind.LLM,
            **{name: max(int(step.get(name) or 0), 0) for name in TOKEN_FIELDS},
            usd=Decimal(str(step.get("usd") or 0)).quantize(Decimal("1e-8")),
            model=str(step.get("model") or "")[:200],
            provider=str(step.get("provider") or "")[:100],
            chat_turn_id=chat_turn_id,
            **cause,
        )
        for step in steps
    ]
    SpendEntry.objects.bulk_create(entries, ignore_conflicts=True, batch_size=500)


def record_run_gpu(
    *,
    run_id: str,
    gpus: int,
    started: datetime | None,
    ended: datetime,
    host: str = "",
    agent_id: str = "",
    sweep_id: str = "",
    loop_id: str = "",
    chat_session_id: str = "",
    user_id: int | None = None,
) -> None:
    """Record a run's GPU time at its end: `gpus` held from `started` (its claim, or its
    SLURM job's start) to `ended`; a run ends once, so its id is the key."""
    wall = max((ended - started).total_seconds(), 0.0) if started else 0.0
    wall_seconds = Decimal(str(round(wall, 3)))
    entry = SpendEntry(
        key=f"gpu:{run_id}",
        kind=SpendKind.GPU,
        created_at=ended,
        gpus=gpus,
        wall_seconds=wall_seconds,
        gpu_seconds=wall_seconds * gpus,
        host=host[:200],
        run_id=run_id,
        agent_id=agent_id,
        sweep_id=sweep_id or "",
        loop_id=loop_id or "",
        chat_session_id=chat_session_id or "",
        user_id=user_id,
    )
    SpendEntry.objects.bulk_create([entry], ignore_conflicts=True)


def withdraw_run_gpu(*, run_ids: list[str]) -> None:
    """Take back the GPU entries of runs that did not end after all: a run lost with its
    host and re-adopted on its return ends later, and records its whole time then."""
    if run_ids:
        SpendEntry.objects.filter(key__in=[f"gpu:{run_id}" for run_id in run_ids]).delete()
