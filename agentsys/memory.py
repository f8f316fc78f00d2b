"""Memory as the runtime sees it, with no Django here.

`MemoryView` is bound to one agent and fills in its id, role and scope on every write. Its
methods are synchronous (they reach the database); agents call them off the event loop
through `Agent.remember`, `Agent.alert` and `Agent.in_memory`. memory_app implements it on
PostgreSQL; `Entry` and `EntryQuery` are the plain records that cross the boundary. A run's
rows (its metrics, log, code) are not memory: they have a port of their own,
`agentsys.run_port.RunPort`."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol

from agentsys.types import EntryType

Order = Literal["newest", "oldest"]
MAX_QUERY_LIMIT = 1000


@dataclass(frozen=True)
class Entry:
    """One memory entry, as plain data."""

    key: str
    type: str
    agent_id: str
    project: str
    data: dict[str, Any]
    created_at: datetime
    target_id: str = ""
    session: str = ""
    sweep: str = ""
    run: str = ""
    role: str = ""
    tags: tuple[str, ...] = ()
    active: bool = True
    acked_at: datetime | None = None  # a MESSAGE read by its target
    updated_at: datetime | None = None


@dataclass(frozen=True)
class EntryQuery:
    """Filters for `MemoryView.query` and GET /api/memories/query, all optional and
    combined with AND. `types` any of; `type_not` none of; `tags` any of; `since`
    inclusive, `before` exclusive; newest first unless `order="oldest"`."""

    project: str | None = None
    session: str | None = None
    sweep: str | None = None
    run: str | None = None
    agent_id: str | None = None
    target_id: str | None = None
    role: str | None = None
    types: tuple[str, ...] = ()
    type_not: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    since: datetime | None = None
    before: datetime | None = None
    active: bool | None = None
    limit: int = 100
    order: Order = "newest"

    def __post_init__(self) -> None:
        known = set(EntryType)
        for name in ("types", "type_not"):
            values = getattr(self, name)
            object.__setattr__(self, name, tuple(values))
            unknown = [v for v in values if v not in known]
            if unknown:
                raise ValueError(
                    f"{name}: unknown entry type {unknown[0]!r}; one of {', '.join(sorted(known))}"
                )
        object.__setattr__(self, "tags", tuple(self.tags))
        if not 1 <= self.limit <= MAX_QUERY_LIMIT:
            raise ValueError(f"limit must be between 1 and {MAX_QUERY_LIMIT}, got {self.limit}")
        if self.order not in ("newest", "oldest"):
            raise ValueError(f"order must be 'newest' or 'oldest', got {self.order!r}")


@dataclass
class ContextLimits:
    """How much each widening level of `assemble_context` may bring in."""

    sweep: int = 20
    session: int = 20
    project: int = 20
    own: int = 500  # own entries considered (oldest first) before the budget cuts them
    inbox: int = 50
    level_types: tuple[str, ...] = field(
        default=(EntryType.CONTEXT, EntryType.REFLECTION, EntryType.ALERT)
    )


class MemoryView(Protocol):
    agent_id: str

    def write(self, *, type: str, data: dict, tags: list[str] | None = None) -> str: ...

    def write_many(self, *, type: str, rows: list[dict], tags: list[str] | None = None) -> int:
        """Entries of one type in one round trip; returns the count."""
        ...

    def read_self(self, *, limit: int = 100) -> list[Entry]: ...

    def query(self, query: EntryQuery) -> list[Entry]: ...

    def msg(self, *, target_id: str, data: dict, tags: list[str] | None = None) -> str: ...

    def read_inbox(self) -> list[Entry]: ...

    def ack(self, key: str) -> bool: ...

    def assemble_context(self, token_budget: int) -> str: ...

    def memory_bank(self, *, limit: int = 20) -> str: ...

    def raise_alert(
        self, *, severity: str, message: str, signature: str, data: dict, run_dir: str = ""
    ) -> str: ...

    # Not memory, nor a run's: the agent's own credential. It stays on this port, which
    # every agent that asks for one (a research loop) has, until credentials get their own.
    def issue_api_token(self) -> str:
        """A new API token of this agent's own (its earlier ones revoked), for the REST API
        its MCP tools call; revoked when the agent ends. Returns the token, stored nowhere."""
        ...
