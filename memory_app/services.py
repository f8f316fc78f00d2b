"""Writes for memory entries."""

from __future__ import annotations

from django.db import transaction

from memory_app.models import MemoryEntry
from researchagent.json_safe import json_safe


def write_entry(
    *,
    type: str,
    project: str,
    agent_id: str = "",
    target_id: str = "",
    session: str = "",
    sweep: str = "",
    run: str = "",
    role: str = "",
    tags: list[str] | None = None,
    data: dict | None = None,
) -> MemoryEntry:
    """Store one entry; it is visible to every reader as soon as this returns."""
    return MemoryEntry.objects.create(
        type=type,
        project=project,
        agent_id=agent_id,
        target_id=target_id,
        session=session,
        sweep=sweep,
        run=run,
        role=role,
        tags=tags or [],
        data=json_safe(data or {}),
    )


@transaction.atomic
def set_active(*, keys: list[str], active: bool) -> int:
    """Deactivate (or restore) memories; an inactive memory never reaches a prompt."""
    return MemoryEntry.objects.filter(pk__in=keys).update(active=active)
