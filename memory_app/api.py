"""REST for memory: a person's view of what the agents learned (their reflections) next to
their own notes, one notion of memory for both; and the entry query by scope, type and tag."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from django.conf import settings
from ninja import Query, Router, Schema, Status
from pydantic import ConfigDict, Field, StringConstraints

from agentsys.memory import MAX_QUERY_LIMIT, EntryQuery
from common.api_contract import MAX_OFFSET, Instant
from memory_app import selectors, services
from memory_app.models import MemoryEntry
from memory_app.schemas import MemoryEntryOut

router = Router(tags=["memory"])

Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=20_000)]
Title = Annotated[str, StringConstraints(strip_whitespace=True, max_length=200)]
Tag = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=64)]
Scope = Annotated[str, StringConstraints(strip_whitespace=True, max_length=100)]


class ErrorOut(Schema):
    detail: str


class MemoryIn(Schema):
    model_config = ConfigDict(extra="forbid")

    text: Text
    title: Title = ""
    tags: list[Tag] = Field(default_factory=list, max_length=20)
    project: Scope = ""
    session: Scope = ""


class MemoryPatch(Schema):
    model_config = ConfigDict(extra="forbid")

    text: Text | None = None
    title: Title | None = None
    tags: list[Tag] | None = Field(default=None, max_length=20)
    active: Annotated[bool, Field(strict=True)] | None = None


class MemoryOut(Schema):
    id: str
    text: str
    title: str
    tags: list[str]
    active: bool
    source: str  # "agent" or "person"
    agent_id: str
    project: str
    session: str
    data: dict[str, Any]
    created_at: datetime
    updated_at: datetime


class MemoryPage(Schema):
    count: int
    items: list[MemoryOut]


def _memory_out(entry: MemoryEntry) -> dict:
    data = entry.data if isinstance(entry.data, dict) else {}
    person = entry.role == "person"  # an agent's reflection a person edited stays the agent's
    return {
        "id": entry.key,
        "text": data.get("text") if isinstance(data.get("text"), str) else "",
        "title": data.get("title") if isinstance(data.get("title"), str) else "",
        "tags": entry.tags,
        "active": entry.active,
        "source": "person" if person else "agent",
        "agent_id": entry.agent_id,
        "project": entry.project,
        "session": entry.session,
        "data": data,
        "created_at": entry.created_at,
        "updated_at": entry.updated_at,
    }


def _user(request):
    return None if request.auth == "token" else request.user


@router.get("/memories", response=MemoryPage, summary="Memories, newest first")
def list_memories(
    request,
    q: str = Query("", max_length=200, description="words in the text or title"),
    project: str | None = Query(None, max_length=100),
    active: bool | None = None,
    tag: str | None = Query(None, max_length=64),
    limit: int = Query(50, ge=1, le=500),
    offset: int = Query(0, ge=0, le=MAX_OFFSET),
):
    count, found = selectors.memories(
        project=project, active=active, tag=tag, search=q.strip(), limit=limit, offset=offset
    )
    return {"count": count, "items": [_memory_out(e) for e in found]}


@router.post("/memories", response={201: MemoryOut}, summary="Add a memory of your own")
def create_memory(request, payload: MemoryIn):
    entry = services.create_memory(
        text=payload.text,
        title=payload.title,
        tags=payload.tags,
        project=payload.project or settings.AGENTSYS.project,
        session=payload.session,
        user=_user(request),
    )
    return Status(201, _memory_out(entry))


# Before /memories/{memory_id}, which would take "query" for an id.
@router.get(
    "/memories/query",
    response={200: list[MemoryEntryOut], 400: ErrorOut},
    summary="Memory entries of every type by scope, type, tags and time",
)
def query_entries(
    request,
    project: str | None = Query(None, max_length=100),
    session: str | None = Query(None, max_length=100),
    sweep: str | None = Query(None, max_length=100),
    run: str | None = Query(None, max_length=100),
    agent_id: str | None = Query(None, max_length=64),
    target_id: str | None = Query(None, max_length=64),
    role: str | None = Query(None, max_length=16),
    type: str = Query("", max_length=200, description="comma-separated: any of"),
    type_not: str = Query("", max_length=200, description="comma-separated: none of"),
    tags: str = Query("", max_length=500, description="comma-separated: any of"),
    since: Instant | None = Query(None, description="inclusive; no offset means UTC"),
    before: Instant | None = Query(None, description="exclusive; no offset means UTC"),
    limit: int = Query(100, ge=1, le=MAX_QUERY_LIMIT),
    order: str = Query("newest", max_length=10, description="newest or oldest"),
):
    try:
        query = EntryQuery(
            project=project,
            session=session,
            sweep=sweep,
            run=run,
            agent_id=agent_id,
            target_id=target_id,
            role=role,
            types=_listed(type),
            type_not=_listed(type_not),
            tags=_listed(tags),
            since=since,
            before=before,
            limit=limit,
            order=order,
        )
    except ValueError as error:
        return Status(400, {"detail": str(error)})
    return selectors.query_entries(query)


@router.patch(
    "/memories/{memory_id}",
    response={200: MemoryOut, 404: ErrorOut, 422: ErrorOut},
    summary="Edit a memory; active=false keeps it out of every prompt",
)
def update_memory(request, memory_id: str, payload: MemoryPatch):
    changes = payload.dict(exclude_unset=True)
    if not changes:
        return Status(422, {"detail": "nothing to change: give text, title, tags or active"})
    try:
        entry = services.update_memory(key=memory_id, user=_user(request), **changes)
    except services.MemoryNotFound:
        return Status(404, {"detail": f"no memory {memory_id!r}"})
    return _memory_out(entry)


@router.delete(
    "/memories/{memory_id}", response={204: None, 404: ErrorOut}, summary="Delete a memory"
)
def delete_memory(request, memory_id: str):
    try:
        services.delete_memory(key=memory_id)
    except services.MemoryNotFound:
        return Status(404, {"detail": f"no memory {memory_id!r}"})
    return Status(204, None)


def _listed(raw: str) -> tuple[str, ...]:
    return tuple(value.strip() for value in raw.split(",") if value.strip())
