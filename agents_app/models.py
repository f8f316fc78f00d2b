"""Agents and the commands sent to them."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from agentsys.types import AgentRole, AgentStatus, CommandKind, choices


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
    # Memory scope (project > session > sweep > run): from the parent, overridable at spawn.
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
        "hosts_app.Host", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    pid = models.IntegerField(null=True, blank=True)
    pid_start = models.BigIntegerField(
        null=True,
        blank=True,
        help_text="When process `pid` started (clock ticks after boot): a pid reused since by "
        "another process is not the agent's",
    )
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
