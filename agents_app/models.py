"""Agents, the commands sent to them, and the durable ordered event log."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from agentsys.types import AgentRole, AgentStatus, CommandKind, ScopeLevel, choices


class Agent(models.Model):
    """One agent at any level. L1 runs inside runagentd; L2/L3 in worker processes."""

    id = models.CharField(primary_key=True, max_length=64, help_text="{role}-{uuid8}")
    role = models.CharField(max_length=16, choices=choices(AgentRole))
    cls_path = models.CharField(max_length=200, help_text="Allow-listed agent class")
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children"
    )
    goal = models.TextField(blank=True)
    config = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=choices(AgentStatus), default=AgentStatus.IDLE)
    # Memory scope (design doc §7.4): inherited from the parent, overridable at spawn.
    project = models.CharField(max_length=100)
    session = models.CharField(max_length=100, blank=True)
    sweep = models.CharField(max_length=100, blank=True)
    run = models.CharField(max_length=100, blank=True)
    chat_session = models.ForeignKey(
        "sessions_app.ChatSession",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="agents",
    )
    host = models.ForeignKey(
        "scheduler_app.Host", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    pid = models.IntegerField(null=True, blank=True)
    iteration = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    result = models.JSONField(null=True, blank=True)
    superseded_by = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The respawned agent after a CRITICAL steer",
    )
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # GET /api/agents?status=..., newest first; reconciliation of RUNNING agents.
            models.Index(fields=["status", "-created_at"], name="agent_status_recent_idx"),
            # A daemon finding the live agents it hosts (restart reconciliation).
            models.Index(
                fields=["host", "status"],
                condition=Q(status__in=["running", "paused"]),
                name="agent_host_live_idx",
            ),
            # L1 prompt {{children_status}}: the agents of one chat session.
            models.Index(fields=["chat_session", "-created_at"], name="agent_chat_recent_idx"),
            # Scope-filtered agent listings (project > session > sweep > run).
            models.Index(fields=["project", "session", "sweep", "run"], name="agent_scope_idx"),
        ]

    def __str__(self) -> str:
        return self.id

    @property
    def scope_level(self) -> ScopeLevel:
        if self.run:
            return ScopeLevel.RUN
        if self.sweep:
            return ScopeLevel.SWEEP
        if self.session:
            return ScopeLevel.SESSION
        return ScopeLevel.PROJECT

    @property
    def is_finished(self) -> bool:
        return AgentStatus(self.status).is_terminal


class CommandStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    DELIVERED = "delivered", "Delivered"
    REFUSED = "refused", "Refused"


class AgentCommand(models.Model):
    """A request from the web (REST, admin, UI) to the daemon hosting an agent: stop, pause,
    resume or steer. The web process holds no agent state, so requests travel as rows."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="commands")
    kind = models.CharField(max_length=16, choices=choices(CommandKind))
    payload = models.JSONField(default=dict, blank=True)
    status = models.CharField(
        max_length=16, choices=CommandStatus.choices, default=CommandStatus.PENDING
    )
    detail = models.TextField(blank=True)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)
    handled_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # The daemon draining pending commands in arrival order.
            models.Index(
                fields=["created_at"],
                condition=Q(status="pending"),
                name="agentcmd_pending_idx",
            ),
            # An agent's command history (admin, API).
            models.Index(fields=["agent", "-created_at"], name="agentcmd_agent_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} → {self.agent_id} ({self.status})"


class EventStream(models.Model):
    """The last sequence number handed out in one stream. Incrementing it takes the row lock
    until commit, so within a stream sequence numbers commit in order and without holes:
    a reader that saw seq N and then sees N+2 knows N+1 is on its way and fetches it."""

    name = models.CharField(primary_key=True, max_length=100)
    last_seq = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.name} @ {self.last_seq}"


class Event(models.Model):
    """The durable, ordered event log (ARCHITECTURE.md decision 3). A client follows one
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
