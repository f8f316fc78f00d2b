"""Reads of the ledger: totals and groups, every one a sum of entries in the database."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import F, Q, QuerySet, Sum, Value
from django.db.models.functions import Coalesce, TruncDate
from django.utils import timezone

from ledger_app.models import SpendDay, SpendEntry

# /api/ledger's group_by: the word → the entry's column.
GROUPS = {
    "loop": "loop_id",
    "session": "chat_session_id",
    "user": "user_id",
    "sweep": "sweep_id",
    "model": "model",
    "host": "host",
}
TOKEN_COLUMNS = (
    "input_tokens",
    "output_tokens",
    "reasoning_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
)
TOKENS = sum((F(name) for name in TOKEN_COLUMNS[1:]), F(TOKEN_COLUMNS[0]))
# Each total: what it sums, and its zero when nothing matched.
SUMMED = {
    "llm_tokens": (TOKENS, 0),
    "llm_usd": (F("usd"), Decimal(0)),
    "gpu_seconds": (F("gpu_seconds"), Decimal(0)),
    "entries": (Value(1), 0),
}


def sums(where: Q | None = None, *, prefix: str = "") -> dict:
    """The totals as aggregates, over the entries matching `where` only where given."""
    return {
        f"{prefix}{name}": Coalesce(Sum(summed, filter=where), Value(zero))
        for name, (summed, zero) in SUMMED.items()
    }


SUMS = sums()

# For _group_sums' SQL: SpendDay's columns are named as SUMMED's totals (llm_tokens, …).
DAYS_TABLE = SpendDay._meta.db_table
ENTRIES_TABLE = SpendEntry._meta.db_table
TOKEN_SUM = " + ".join(TOKEN_COLUMNS)


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
    return grouped_with_total(group_by, since=since)[0]


def grouped_with_total(group_by: str, *, since: datetime | None = None) -> tuple[list, dict]:
    """The groups and their total, from one query (_group_sums): each group's sums are exact
    (decimals), so the total is their sum; a second aggregate doubled the read."""
    column = GROUPS[group_by]
    with connection.cursor() as cursor:
        cursor.execute(*_group_sums(column, since))
        rows = [dict(zip((column, *SUMMED), row, strict=True)) for row in cursor.fetchall()]
    total = {name: sum((r[name] for r in rows), zero) for name, (_, zero) in SUMMED.items()}
    groups = [{"key": "" if r[column] is None else str(r[column]), **_out(r)} for r in rows]
    return groups, _out(total)


# The SQL below is built from this module's names only (GROUPS' columns, the models' tables);
# ruff's S608 is told so where it is joined. What a request brings, `since`, is a parameter.
def _group_sums(column: str, since: datetime | None) -> tuple[str, list]:
    """The sums by `column` of the entries since `since`, most money first (then GPU time,
    then the group, as the entries' own GROUP BY sorted them): SpendDay's whole days, a few
    rows a day and cause instead of 10^6 entries, and where `since` falls inside a day, the
    entries of the rest of that day, so that it is exact to the instant."""
    days = f"SELECT {column}, llm_tokens, llm_usd, gpu_seconds, entries FROM {DAYS_TABLE}"  # noqa: S608
    parts, params = [days], []
    if since is not None:
        since = since.astimezone(UTC) if timezone.is_aware(since) else timezone.make_aware(since)
        day_start = since.replace(hour=0, minute=0, second=0, microsecond=0)
        parts[0] += " WHERE day >= %s" if since == day_start else " WHERE day > %s"
        params.append(since.date())
        if since > day_start:
            rest = f"SELECT {column}, {TOKEN_SUM}, usd, gpu_seconds, 1 FROM {ENTRIES_TABLE}"  # noqa: S608
            rest += " WHERE created_at >= %s"
            params.append(since)
            if since.date() < date.max:  # else the day's rest is all there is after it
                rest += " AND created_at < %s"
                params.append(day_start + timedelta(days=1))
            parts.append(rest)
    sums = ", ".join(f"sum({name}) AS {name}" for name in SUMMED)
    return (
        f"SELECT {column}, {sums} FROM ({' UNION ALL '.join(parts)}) AS spent "  # noqa: S608
        "GROUP BY 1 ORDER BY 3 DESC, 4 DESC, 1",
        params,
    )


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


def run_gpu(run_id: str) -> dict | None:
    """A run's GPU entry, written at its end: {"gpu_hours", "gpus", "host"}; None before."""
    row = (
        SpendEntry.objects.filter(key=f"gpu:{run_id}").values("gpu_seconds", "gpus", "host").first()
    )
    if row is None:
        return None
    return {"gpu_hours": float(row["gpu_seconds"]) / 3600, "gpus": row["gpus"], "host": row["host"]}


def spent_by_session(session_id: str) -> dict:
    return totals(SpendEntry.objects.filter(chat_session_id=session_id))


def spent_by_turn(session_id: str) -> dict[str, dict]:
    """A chat session's spend per turn, one query: {turn id: totals}."""
    rows = (
        SpendEntry.objects.filter(chat_session_id=session_id)
        .exclude(chat_turn_id="")
        .values("chat_turn_id")
        .annotate(**SUMS)
        .order_by()
    )
    return {r["chat_turn_id"]: _out(r) for r in rows}


def week_start(now: datetime) -> tuple[datetime, datetime]:
    """Today's and this week's (Monday's) midnight in the site's time zone."""
    local = timezone.localtime(now)
    today = local.replace(hour=0, minute=0, second=0, microsecond=0)
    return today, today - timedelta(days=today.weekday())


def people_this_week(now: datetime | None = None) -> list[dict]:
    """Per person, what was spent today and this week (since Monday), most money first:
    {"user_id", "name", "today": totals, "week": totals}. No person: spent by nobody's loop
    (a loop started from the API), named ''."""
    today, monday = week_start(now or timezone.now())
    rows = (
        entries(since=monday)
        .values("user_id")
        .annotate(
            # Today's first: once named, "gpu_seconds" is the week's sum, not the column.
            **sums(Q(created_at__gte=today), prefix="today_"),
            **SUMS,
        )
        .order_by("-llm_usd", "-gpu_seconds", "user_id")
    )
    names = dict(
        get_user_model()
        .objects.filter(pk__in=[r["user_id"] for r in rows if r["user_id"] is not None])
        .values_list("pk", "username")
    )
    return [
        {
            "user_id": r["user_id"],
            "name": names.get(r["user_id"], ""),
            "week": _out(r),
            "today": _out({name: r[f"today_{name}"] for name in SUMS}),
        }
        for r in rows
    ]
