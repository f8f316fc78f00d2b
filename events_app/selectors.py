"""Reads of the event log."""

from __future__ import annotations

from events_app.models import Event, EventStream

REPLAY_LIMIT = 1000


def events_after(*, stream: str, after_seq: int, limit: int = REPLAY_LIMIT) -> list[Event]:
    """Events of `stream` with seq > after_seq, oldest first (served by the unique index)."""
    return list(Event.objects.filter(stream=stream, seq__gt=after_seq).order_by("seq")[:limit])


def last_seq(*, stream: str) -> int:
    row = EventStream.objects.filter(name=stream).values_list("last_seq", flat=True).first()
    return row or 0


def recent_events(*, agent_id: str, limit: int) -> list[Event]:
    """An agent's last `limit` events, oldest first (event_agent_timeline_idx)."""
    return list(reversed(Event.objects.filter(agent_id=agent_id).order_by("-id")[:limit]))
