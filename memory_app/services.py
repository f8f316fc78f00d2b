"""Writes for memory entries."""

from __future__ import annotations

from django.db import IntegrityError, transaction

from agentsys.types import EntryType, new_entry_key
from common.ids import create_with_unique_id
from common.json_safe import json_safe
from memory_app.models import MemoryEntry


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
    """Store one entry; it is visible to every reader as soon as this returns. Keys are
    12 random hex characters, so a clash is retried with a fresh key."""
    return create_with_unique_id(
        MemoryEntry,
        new_entry_key,
        type=type,
        project=project,
        agent_id=agent_id,
        target_id=target_id,
        session=session,
        sweep=sweep,
        run=run,
        role=role,
        tags=clean_tags(tags),
        data=json_safe(data or {}),
    )


TAG_LENGTH = 64


def clean_tags(tags) -> list[str]:
    """Tags as stored: text without NUL, at most 64 characters, no blanks or repeats. An
    LLM's tag that breaks these rules is mended, not allowed to lose the entry."""
    cleaned: list[str] = []
    for tag in tags or []:
        text = json_safe(str(tag)).strip()[:TAG_LENGTH]
        if text and text not in cleaned:
            cleaned.append(text)
    return cleaned


def write_entries(
    *,
    type: str,
    project: str,
    rows: list[dict],
    agent_id: str = "",
    session: str = "",
    sweep: str = "",
    run: str = "",
    role: str = "",
    tags: list[str] | None = None,
) -> list[MemoryEntry]:
    """Store many entries of one type and scope in one statement (a run's metrics rows),
    all or none."""
    entries = [
        MemoryEntry(
            type=type,
            project=project,
            agent_id=agent_id,
            session=session,
            sweep=sweep,
            run=run,
            role=role,
            tags=clean_tags(tags),
            data=json_safe(row),
        )
        for row in rows
    ]
    try:
        with transaction.atomic():
            return MemoryEntry.objects.bulk_create(entries)
    except IntegrityError:  # a key clash (48 random bits): store them one by one instead
        with transaction.atomic():
            return [
                create_with_unique_id(
                    MemoryEntry,
                    new_entry_key,
                    **{
                        f.attname: getattr(e, f.attname)
                        for f in MemoryEntry._meta.concrete_fields
                        if f.attname != "key"
                    },
                )
                for e in entries
            ]


@transaction.atomic
def set_active(*, keys: list[str], active: bool) -> int:
    """Deactivate (or restore) memories; an inactive memory never reaches a prompt."""
    return MemoryEntry.objects.filter(pk__in=keys).update(active=active)


class MemoryNotFound(Exception):
    pass


def person_agent_id(user) -> str:
    """Who a person's memory is from, as prompts show it."""
    return f"user:{user.get_username()}" if user is not None else "user:api-token"


@transaction.atomic
def create_memory(
    *,
    text: str,
    project: str,
    title: str = "",
    tags: list[str] | None = None,
    session: str = "",
    user=None,
) -> MemoryEntry:
    """A person's own memory: a REFLECTION like the agents', so it reaches the same prompts."""
    data = {"text": text, **({"title": title} if title else {})}
    entry = write_entry(
        type=EntryType.REFLECTION,
        project=project,
        session=session,
        agent_id=person_agent_id(user),
        role="person",
        tags=tags,
        data=data,
    )
    if user is not None:
        MemoryEntry.objects.filter(pk=entry.pk).update(author=user)
        entry.author = user
    return entry


@transaction.atomic
def update_memory(
    *,
    key: str,
    text: str | None = None,
    title: str | None = None,
    tags: list[str] | None = None,
    active: bool | None = None,
    user=None,
) -> MemoryEntry:
    try:
        entry = MemoryEntry.objects.select_for_update().get(pk=key, type=EntryType.REFLECTION)
    except MemoryEntry.DoesNotExist:
        raise MemoryNotFound(key) from None
    data = dict(entry.data)
    if text is not None:
        data["text"] = text
    if title is not None:
        data["title"] = title
    entry.data = json_safe(data)
    if tags is not None:
        entry.tags = tags
    if active is not None:
        entry.active = active
    if user is not None:
        entry.author = user
    entry.save()
    return entry


@transaction.atomic
def delete_memory(*, key: str) -> None:
    deleted, _ = MemoryEntry.objects.filter(pk=key, type=EntryType.REFLECTION).delete()
    if not deleted:
        raise MemoryNotFound(key)
