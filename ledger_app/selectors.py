"""Reads of the ledger: totals and groups, every one a sum of entries in the database."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from django.db.models import F, Q, QuerySet, Sum, Value
from django.db.models.functions import Coalesce, TruncDate
from django.utils import timezone

from ledger_app.models import SpendEntry

# /api/ledger's group_by: the word → the entry's column.
GROUPS = {
    "loop": "loop_id",
    "session": "chat_session_id",
    "user": "user_id",
    "sweep": "sweep_id",
    "model": "model",
    "host": "host",
}
TOKENS = (
    F("input_tokens")
    + F("output_tokens")
    + F("reasoning_tokens")
    + F("cache_read_tokens")
    + F("cache_write_tokens")
)
SUMS = {
    "llm_tokens": Coalesce(Sum(TOKENS), Value(0)),
    "llm_usd": Coalesce(Sum("usd"), Value(Decimal(0))),
    "gpu_seconds": Coalesce(Sum("gpu_seconds"), Value(Decimal(0))),
    "entries": Coalesce(Sum(Value(1)), Value(0)),
}


def entries(*, since: datetime | None = None, **where) -> QuerySet[SpendEntry]:
    found = SpendEntry.objects.filter(**where)
    return found.filter(created_at__gte=since) if since else found


def _out(row: dict) -> dict:
    return {
        "llm_tokens": int(row["llm_tokens"]),
        "llm_usd": float(row["llm_usd"]),
        "gpu_hours": float(row["gpu_seconds"]) / 3600,
        "entries": int(row["entries"]),
    }


def totals(found: QuerySet[SpendEntry]) -> dict:
    return _out(found.aggregate(**SUMS))


def grouped(group_by: str, *, since: datetime | None = None) -> list[dict]:
    """One row a group, most money first: {"key", "llm_tokens", "llm_usd", "gpu_hours"}."""
    column = GROUPS[group_by]
    rows = (
        entries(since=since)
        .values(column)
        .annotate(**SUMS)
        .order_by("-llm_usd", "-gpu_seconds", column)
    )
    return [{"key": "" if r[column] is None else str(r[column]), **_out(r)} for r in rows]


def by_day(group_by: str, *, since: datetime | None = None) -> list[dict]:
    """For the Spend page's chart: {"day", "key", "llm_usd", "llm_tokens", "gpu_hours"}."""
    column = GROUPS[group_by]
    rows = (
        entries(since=since)
        .annotate(day=TruncDate("created_at"))
        .values("day", column)
        .annotate(**SUMS)
        .order_by("day", column)
    )
    return [
        {"day": r["day"].isoformat(), "key": "" if r[column] is None else str(r[column]), **_out(r)}
        for r in rows
    ]


def spent_by_loop(loop_id: str) -> dict:
    """A loop's model steps and its runs' GPU time."""
    return totals(SpendEntry.objects.filter(Q(loop_id=loop_id)))


def spent_by_run(run_id: str) -> dict:
    return totals(SpendEntry.objects.filter(run_id=run_id))


def spent_of_loop(loop_id: str, *, started: datetime | None, ended: datetime | None) -> dict:
    """A research loop's `spent`: its model steps and its runs' GPU time, from the ledger, and
    its wall time (from its start to its end, or to now while it lives)."""
    total = spent_by_loop(loop_id)
    wall = ((ended or timezone.now()) - started).total_seconds() if started else 0.0
    return {
        "llm_tokens": total["llm_tokens"],
        "llm_usd": total["llm_usd"],
        "gpu_hours": total["gpu_hours"],
        "wall_hours": max(wall, 0.0) / 3600,
    }
