"""Writes to the ledger. Each entry is inserted with ON CONFLICT DO NOTHING on its key, inside
the caller's transaction (the chat turn's close, the loop's saved state, the run's end): a
step recorded again after a restart stays one row, and one whose record was rolled back is
not in the ledger either."""

from __future__ import annotations

import functools
from datetime import datetime
from decimal import Decimal

from django.db import connection
from django.db.models import Case, F, Q, Value, When
from django.db.models.functions import Coalesce

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


def _causes() -> tuple[str, tuple]:
    """A SELECT of each agent's id and the loop, sweep, chat session and person behind its
    model steps (an L1's or an L2's), through foreign keys (the loop's row and the chat are
    apps above this one). Joined on an entry's agent_id, so that a step is one statement."""
    is_loop = Q(role=AgentRole.RESEARCH)
    causes = Agent.objects.order_by().values(
        cause_agent=F("id"),
        cause_loop=Case(When(is_loop, then=F("id")), default=Value("")),
        cause_sweep=Coalesce(F("research_loop__sweep_id"), Value("")),
        cause_session=Coalesce(F("chat_session_id"), Value("")),
        cause_user=Coalesce(F("chat_session__owner_id"), F("research_loop__sweep__created_by_id")),
    )
    return causes.query.sql_with_params()


# An entry's columns that its agent's cause (above) fills in, where it has an agent.
CAUSED = {
    "loop_id": "cause_loop",
    "sweep_id": "cause_sweep",
    "chat_session_id": "cause_session",
    "user_id": "cause_user",
}
FIELDS = [f for f in SpendEntry._meta.concrete_fields if not f.primary_key]
BATCH = 500  # rows a statement: 22 parameters each, well under PostgreSQL's 65,535


@functools.cache
def _insert_sql(*, caused: bool) -> tuple[str, str, str, tuple]:
    """The INSERT's head, one row's placeholders and its tail (with the tail's parameters),
    built once a process: compiling the causes' four-table join took the ORM 0.6 ms, more
    than the write itself."""
    quote = connection.ops.quote_name
    names = ", ".join(quote(f.column) for f in FIELDS)
    picked = [f"e.{quote(f.column)}" for f in FIELDS]
    join, params = "", ()
    if caused:
        causes, params = _causes()
        join = f"LEFT JOIN ({causes}) AS cause ON cause.cause_agent = e.agent_id"
        picked = [
            f"COALESCE(cause.{CAUSED[f.column]}, {column})" if f.column in CAUSED else column
            for f, column in zip(FIELDS, picked, strict=True)
        ]
    table = quote(SpendEntry._meta.db_table)
    head = f"INSERT INTO {table} ({names}) SELECT {', '.join(picked)} FROM (VALUES "  # noqa: S608
    # Typed, so that a column of NULLs (no person) is an integer, not text.
    row = "(" + ", ".join(f"%s::{f.db_type(connection)}" for f in FIELDS) + ")"
    tail = f") AS e ({names}) {join} ON CONFLICT (key) DO NOTHING"
    return head, row, tail, tuple(params)


def _insert(entries: list[SpendEntry], *, caused: bool = False) -> None:
    """`entries` in one INSERT … ON CONFLICT (key) DO NOTHING a batch, in the caller's
    transaction; `caused`: their loop, sweep, chat session and person come from their
    agent's rows in the same statement (without one, or where it is gone, they keep their
    own). Not bulk_create: it cannot join, and it built a model's worth of Python a row.
    The SpendDay triggers see the rows the statement inserted, not the ones it skipped."""
    head, row, tail, tail_params = _insert_sql(caused=caused)
    with connection.cursor() as cursor:
        for start in range(0, len(entries), BATCH):
            batch = entries[start : start + BATCH]
            values = [
                f.get_db_prep_save(getattr(e, f.attname), connection) for e in batch for f in FIELDS
            ]
            cursor.execute(head + ", ".join([row] * len(batch)) + tail, [*values, *tail_params])


def record_llm_steps(
    *,
    steps: list[dict],
    agent_id: str = "",
    chat_session_id: str = "",
    user_id: int | None = None,
    chat_turn_id: str = "",
) -> None:
    """Record the paid model steps (agentsys.opencode.events.step_of) of a research loop's
    agent `agent_id` (its loop, sweep, chat and person read from its rows as they are
    inserted), or of a chat session's turn `chat_turn_id` (its person `user_id`)."""
    steps = [s for s in steps if isinstance(s, dict) and s.get("key")]
    if not steps:
        return
    entries = [
        SpendEntry(
            key=f"llm:{step['key']}"[:200],
            kind=SpendKind.LLM,
            **{name: max(int(step.get(name) or 0), 0) for name in TOKEN_FIELDS},
            usd=Decimal(str(step.get("usd") or 0)).quantize(Decimal("1e-8")),
            model=str(step.get("model") or "")[:200],
            provider=str(step.get("provider") or "")[:100],
            chat_turn_id=chat_turn_id,
            agent_id=agent_id,
            chat_session_id=chat_session_id,
            user_id=user_id,
        )
        for step in steps
    ]
    _insert(entries, caused=True)


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
    _insert([entry])


def withdraw_run_gpu(*, run_ids: list[str]) -> None:
    """Take back the GPU entries of runs that did not end after all: a run lost with its
    host and re-adopted on its return ends later, and records its whole time then."""
    if run_ids:
        SpendEntry.objects.filter(key__in=[f"gpu:{run_id}" for run_id in run_ids]).delete()
