"""Reads for memory entries."""

from __future__ import annotations

from django.db.models import Q

from agentsys.types import EntryType
from memory_app.models import MemoryEntry


def entries_of_agent(
    *, agent_id: str, inbox: bool = False, types: list[str] | None = None, limit: int = 50
) -> list[MemoryEntry]:
    """What an agent wrote (or, with inbox, the messages sent to it), newest first."""
    mine = Q(target_id=agent_id, type=EntryType.MESSAGE) if inbox else Q(agent_id=agent_id)
    entries = MemoryEntry.objects.filter(mine).order_by("-created_at", "-key")
    if types:
        entries = entries.filter(type__in=types)
    return list(entries[:limit])
