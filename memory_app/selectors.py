"""Reads for memory entries. Every query here is served by an index range scan on a table
of millions of rows (tests/integration/test_memory_indexes.py runs EXPLAIN on each)."""

from __future__ import annotations

from django.db.models import Q, TextField
from django.db.models.functions import Cast

from agentsys.memory import Entry, EntryQuery
from agentsys.types import EntryType
from memory_app.entry_sql import Where, first_rows, where_for
from memory_app.models import MemoryEntry

NEWEST = ("-created_at", "-key")


def query_entries(query: EntryQuery) -> list[Entry]:
    """Entries matching every filter given, newest first unless order="oldest"."""
    types = query.types
    if not types and _scope_only(query):
        # The scope indexes lead with (scope, type): one range per type beats reading and
        # sorting a whole project (10^5 rows in a busy one) to return the newest 100.
        types = tuple(t for t in EntryType if t not in query.type_not)
    return first_rows(where_for(query), types, query.limit, newest=query.order == "newest")


def _scope_only(query: EntryQuery) -> bool:
    """Filtered by project/session/sweep/run, not by an agent or target (their indexes
    lead with them and serve every type at once)."""
    scoped = any(getattr(query, n) is not None for n in ("project", "session", "sweep", "run"))
    return scoped and query.agent_id is None and query.target_id is None


LEVEL_FIELDS = {"project": "project", "session": "session", "sweep": "sweep", "run": "run"}


def level_entries(
    *, field: str, value: str, types: tuple[str, ...], other_than: str, limit: int
) -> list[Entry]:
    """A widening level of context assembly: the newest active entries of `types` in one
    project, session or sweep, written by agents other than `other_than`."""
    where = (
        Where()
        .add(f"{LEVEL_FIELDS[field]} = %s", value)
        .add("active")
        .add("agent_id <> %s", other_than)
    )
    return first_rows(where, types, limit)


def entries_of_agent(
    *, agent_id: str, inbox: bool = False, types: list[str] | None = None, limit: int = 50
) -> list[MemoryEntry]:
    """What an agent wrote (or, with inbox, the messages sent to it), newest first."""
    mine = Q(target_id=agent_id, type=EntryType.MESSAGE) if inbox else Q(agent_id=agent_id)
    entries = MemoryEntry.objects.filter(mine).order_by(*NEWEST)
    if types:
        entries = entries.filter(type__in=types)
    return list(entries[:limit])


def own_entries(*, agent_id: str, limit: int) -> list[Entry]:
    """ "My Entries": the agent's own active entries but RAW_FILE, oldest first."""
    where = Where().add("agent_id = %s", agent_id).add("active")
    where.add("type <> %s", EntryType.RAW_FILE)
    return first_rows(where, (), limit, newest=False)


def inbox(*, agent_id: str, limit: int = 50) -> list[Entry]:
    """Unacknowledged messages to the agent, oldest first."""
    where = Where().add("target_id = %s", agent_id).add("acked_at IS NULL").add("active")
    return first_rows(where, (EntryType.MESSAGE,), limit, newest=False)


def memory_bank(*, project: str, limit: int = 20) -> list[Entry]:
    """The newest active reflections of a project, across all its sessions: what the L1
    and L2 prompts remember. Deactivated and deleted memories never come back here."""
    where = Where().add("project = %s", project).add("active")
    return first_rows(where, (EntryType.REFLECTION,), limit)


def memories(
    *,
    project: str | None = None,
    active: bool | None = None,
    tag: str | None = None,
    search: str = "",
    limit: int = 50,
    offset: int = 0,
) -> tuple[int, list[MemoryEntry]]:
    """Memories a person browses: reflections, the agents' and their own, newest first."""
    found = MemoryEntry.objects.filter(type=EntryType.REFLECTION)
    if project is not None:
        found = found.filter(project=project)
    if active is not None:
        found = found.filter(active=active)
    if tag:
        found = found.filter(tags__overlap=[tag])
    if search:
        found = found.filter(Q(data__text__icontains=search) | Q(data__title__icontains=search))
    return found.count(), list(found.order_by(*NEWEST)[offset : offset + limit])


SCOPE_FIELDS = ("project", "session", "sweep", "run")


def browse(
    *,
    scope: str = "",
    scope_value: str = "",
    type: str = "",
    tag: str = "",
    search: str = "",
    active: bool | None = None,
    limit: int = 50,
    offset: int = 0,
) -> tuple[int | None, list[MemoryEntry]]:
    """Entries of every type a person browses on the memory page, newest first. Without a
    search the count is exact; a search over the JSON text counts nothing (None) rather than
    scan millions of rows twice."""
    found = MemoryEntry.objects.all()
    if scope in SCOPE_FIELDS and scope_value:
        found = found.filter(**{scope: scope_value})
    if type:
        found = found.filter(type=type)
    if tag:
        found = found.filter(tags__overlap=[tag])
    if active is not None:
        found = found.filter(active=active)
    count = None
    if search:
        found = found.annotate(body=Cast("data", TextField())).filter(body__icontains=search)
    else:
        count = found.count()
    return count, list(found.order_by(*NEWEST)[offset : offset + limit])
