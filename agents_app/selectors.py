"""Reads for agents and the event log."""

from __future__ import annotations

from agents_app.models import Agent, Event

REPLAY_LIMIT = 1000


def events_after(*, stream: str, after_seq: int, limit: int = REPLAY_LIMIT) -> list[Event]:
    """Events of `stream` with seq > after_seq, oldest first (served by the unique index)."""
    return list(Event.objects.filter(stream=stream, seq__gt=after_seq).order_by("seq")[:limit])


def last_seq(*, stream: str) -> int:
    from agents_app.models import EventStream

    row = EventStream.objects.filter(name=stream).values_list("last_seq", flat=True).first()
    return row or 0


def descendants(*, agent_id: str) -> list[Agent]:
    """Every agent below `agent_id`, deepest first (leaves before their parents)."""
    rows = Agent.objects.raw(
        """
        WITH RECURSIVE tree(id, depth, path) AS (
            SELECT id, 1, ARRAY[%s::varchar, id] FROM agents_app_agent WHERE parent_id = %s
            UNION ALL
            SELECT a.id, t.depth + 1, t.path || a.id
            FROM agents_app_agent a JOIN tree t ON a.parent_id = t.id
            WHERE a.id <> ALL(t.path)  -- a parent cycle (made by hand) must not loop forever
        )
        SELECT a.*, t.depth FROM agents_app_agent a JOIN tree t ON a.id = t.id
        ORDER BY t.depth DESC, a.created_at
        """,
        [agent_id, agent_id],
    )
    return list(rows)
