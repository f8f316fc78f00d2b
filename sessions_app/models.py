"""Chat sessions, their messages, and each streamed response (a turn)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from agentsys.types import TurnStatus, choices, new_id


def new_chat_id() -> str:
    return new_id("chat", 12)


def new_turn_id() -> str:
    return new_id("turn", 12)


# The class of a session's own L1 agent (one per chat, living as long as the chat).


class ChatMode(models.TextChoices):
    WILD = "wild", "Wild: always spawn research"
    AUTO = "auto", "Auto: the LLM decides"
    AGENT = "agent", "Agent: direct tool use only"


class ChatSession(models.Model):
    id = models.CharField(primary_key=True, max_length=40, default=new_chat_id)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    title = models.CharField(max_length=200, default="New chat")
    mode = models.CharField(max_length=8, choices=ChatMode.choices, default=ChatMode.AUTO)
    model_provider = models.CharField(max_length=100, blank=True)
    model_id = models.CharField(max_length=200, blank=True)
    system_prompt = models.TextField(blank=True)
    opencode_session_id = models.CharField(max_length=100, blank=True)
    workdir = models.CharField(max_length=1000, blank=True, help_text="Project root the agents use")
    project = models.CharField(max_length=100, blank=True, help_text="Memory scope name")
    default_budget = models.JSONField(
        default=dict,
        blank=True,
        help_text="Caps of the loops it starts, as a loop's budget ({}: none); the tightest "
        "of a loop's own, this and its person's applies",
    )
    archived = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at"]
        indexes = [
            # Sidebar: a person's sessions, most recently active first.
            models.Index(fields=["owner", "archived", "-updated_at"], name="chat_owner_recent_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.title} ({self.id})"


class MessageRole(models.TextChoices):
    USER = "user", "User"
    ASSISTANT = "assistant", "Assistant"
    SYSTEM = "system", "System"


class ChatMessage(models.Model):
    session = models.ForeignKey(ChatSession, on_delete=models.CASCADE, related_name="messages")
    seq = models.PositiveIntegerField(help_text="Position in the session, from 1")
    role = models.CharField(max_length=16, choices=MessageRole.choices)
    content = models.TextField(blank=True)
    thinking = models.TextField(blank=True)
    # Ordered parts as streamed: [{"id", "type": "text"|"reasoning"|"tool", ...}, ...]
    parts = models.JSONField(default=list, blank=True)
    turn = models.ForeignKey(
        "ChatTurn", null=True, blank=True, on_delete=models.SET_NULL, related_name="messages"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["session", "seq"]
        constraints = [
            # Also the index behind "messages of a session in order" and "last 10 messages".
            models.UniqueConstraint(fields=["session", "seq"], name="chat_message_seq_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.session_id}#{self.seq} {self.role}"


class ChatTurn(models.Model):
    """One streamed LLM response (the original's in-memory ChatStreamRuntime). Its stream
    events live in the durable event log under the stream name `chat:<session id>`."""

    id = models.CharField(primary_key=True, max_length=40, default=new_turn_id)
    session = models.ForeignKey(ChatSession, on_delete=models.CASCADE, related_name="turns")
    status = models.CharField(
        max_length=16, choices=choices(TurnStatus), default=TurnStatus.RUNNING
    )
    mode = models.CharField(max_length=8, choices=ChatMode.choices, default=ChatMode.AUTO)
    skill_id = models.CharField(max_length=100, blank=True)
    synthetic = models.BooleanField(default=False, help_text="Started by a child's completion")
    user_message = models.ForeignKey(
        ChatMessage, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    message = models.TextField(blank=True, help_text="What the turn answers (user or system)")
    prompt = models.TextField(blank=True, help_text="The rendered prompt sent to the LLM")
    variables = models.JSONField(default=dict, blank=True, help_text="What the prompt was made of")
    # The runagentd streaming it (claimed when null): a daemon that dies leaves its turns
    # interrupted, never running forever.
    host = models.ForeignKey(
        "hosts_app.Host", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    after_seq = models.BigIntegerField(
        default=0, help_text="The session stream's last seq before this turn's first event"
    )
    actions = models.JSONField(default=list, blank=True, help_text="l1_action results")
    stop_requested = models.BooleanField(default=False, help_text="A person pressed stop")
    full_text = models.TextField(blank=True)
    full_thinking = models.TextField(blank=True)
    parts = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)
    last_event_id = models.BigIntegerField(null=True, blank=True)
    started_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at"]
        indexes = [
            # A session's turns, newest first (reconnect, history).
            models.Index(fields=["session", "-started_at"], name="chat_turn_session_idx"),
            # runagentd claiming turns nobody streams yet, oldest first.
            models.Index(
                fields=["started_at"],
                condition=Q(status__in=["queued", "running"]),
                name="chat_turn_live_idx",
            ),
        ]
        constraints = [
            # At most one live stream per session; also serves "the active stream of a session".
            models.UniqueConstraint(
                fields=["session"],
                condition=Q(status="running"),
                name="chat_one_running_turn",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.id} ({self.status})"
