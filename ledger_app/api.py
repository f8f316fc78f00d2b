"""GET /api/ledger: what was spent, grouped by loop, chat session, person, sweep, model or
host, since a time. Every number is a sum of the ledger's entries."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

from ninja import Field, Query, Router, Schema
from pydantic import field_validator

from ledger_app import selectors

router = Router(tags=["ledger"])


class LedgerQuery(Schema):
    group_by: Literal["loop", "session", "user", "sweep", "model", "host"] = "loop"
    since: datetime | None = Field(None, description="ISO 8601 (UTC unless it says); unset: all")

    @field_validator("since")
    @classmethod
    def _in_utc(cls, since: datetime | None) -> datetime | None:
        """In UTC: PostgreSQL takes offsets up to ±15:59 only, ISO 8601 any."""
        if since is None:
            return None
        try:
            return since.astimezone(UTC) if since.tzinfo else since.replace(tzinfo=UTC)
        except OverflowError:
            raise ValueError("since is out of range") from None


class SpendGroupOut(Schema):
    key: str = Field(description="The group's loop id, session id, user id, … ('' for none)")
    llm_tokens: int
    llm_usd: float
    gpu_hours: float
    entries: int


class LedgerOut(Schema):
    group_by: str
    since: datetime | None
    groups: list[SpendGroupOut]
    total: SpendGroupOut


@router.get("/ledger", response=LedgerOut)
def ledger(request, query: Query[LedgerQuery]):
    groups, total = selectors.grouped_with_total(query.group_by, since=query.since)
    return {
        "group_by": query.group_by,
        "since": query.since,
        "groups": groups,
        "total": {"key": "", **total},
    }


class SpentOut(Schema):
    """What a research loop spent (GET /api/research/{id})."""

    llm_tokens: int
    llm_usd: float
    gpu_hours: float
    wall_hours: float
