"""The durable, ordered event log: streams and their events."""

from __future__ import annotations

from django.db import models
from django.db.models import Q


class EventStream(models.Model):
    """The last sequence number handed out in one stream. Incrementing it takes the row lock
    until commit, so within a stream sequence numbers commit in order and without holes:
    a reader that saw seq N and then sees N+2 knows N+1 is on its way and fetches it."""

    name = models.CharField(primary_key=True, max_length=100)
    last_seq = models.BigIntegerField(default=0)

    class Meta:
        db_table = "agents_app_eventstream"  # its name before the move out of agents_app

    def __str__(self) -> str:
        return f"{self.name} @ {self.last_seq}"


class Event(models.Model):
    """The durable, ordered event log. A client follows one
    stream and resumes from the last `seq` it saw: it gets everything after, no gap and no
    duplicate, whatever restarted in between.

    Streams: `agents` (lifecycle and custom agent events, and alerts: `alert_raised`,
    `alert_resolved`; the stream `/api/agents/events` and the WebSocket serve) and
    `chat.<session id>` (a chat's stream events)."""

    id = models.BigAutoField(primary_key=True)
    stream = models.CharField(max_length=100)
    seq = models.BigIntegerField(help_text="Position in its stream, from 1, without holes")
    kind = models.CharField(max_length=64)
    agent_id = models.CharField(max_length=64, blank=True)
    payload = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "agents_app_event"  # its name before the move out of agents_app
        ordering = ["id"]
        constraints = [
            # Also the index for replay: WHERE stream = s AND seq > n ORDER BY seq.
            models.UniqueConstraint(fields=["stream", "seq"], name="event_stream_seq_unique"),
        ]
        indexes = [
            # One agent's timeline (agent detail page, GET /api/agents/{id}).
            models.Index(
                fields=["agent_id", "id"],
                condition=~Q(agent_id=""),
                name="event_agent_timeline_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.stream}#{self.seq} {self.kind}"

    def as_message(self) -> dict:
        """The JSON shape every client receives (WebSocket, SSE, channel layer)."""
        return {
            "id": self.seq,
            "stream": self.stream,
            "kind": self.kind,
            "agent_id": self.agent_id,
            "payload": self.payload,
            "created_at": self.created_at.isoformat(),
        }
