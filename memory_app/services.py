"""Writes for memory entries."""

from __future__ import annotations

from django.db import transaction

from memory_app.models import MemoryEntry


@transaction.atomic
def set_active(*, keys: list[str], active: bool) -> int:
    """Deactivate (or restore) memories; an inactive memory never reaches a prompt."""
    return MemoryEntry.objects.filter(pk__in=keys).update(active=active)
