"""Memory entries: what agents plan, see, measure and learn, and the
person's own notes. One notion of memory for both."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.db import models
from django.db.models import Q
from django.utils import timezone

from agentsys.types import EntryType, choices, new_entry_key


class MemoryEntry(models.Model):
    key = models.CharField(primary_key=True, max_length=12, default=new_entry_key)
    type = models.CharField(max_length=16, choices=choices(EntryType))
    agent_id = models.CharField(max_length=64, blank=True, help_text="Who wrote it")
    target_id = models.CharField(max_length=64, blank=True, help_text="Recipient of a MESSAGE")
    project = models.CharField(max_length=100)
    session = models.CharField(max_length=100, blank=True)
    sweep = models.CharField(max_length=100, blank=True)
    run = models.CharField(max_length=100, blank=True)
    role = models.CharField(max_length=16, blank=True)
    tags = ArrayField(models.CharField(max_length=64), default=list, blank=True)
    data = models.JSONField(default=dict, blank=True)
    active = models.BooleanField(default=True, help_text="Inactive memories never reach a prompt")
    acked_at = models.DateTimeField(null=True, blank=True, help_text="MESSAGE read by its target")
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        help_text="Set when a person wrote or edited it",
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name_plural = "memory entries"
        # Every read the system issues is one of these ranges, newest (or oldest) first;
        # `key` breaks ties so that the same rows always come in the same order.
        indexes = [
            # Widening per level: newest entries of a type in a project/session/sweep/run.
            models.Index(
                fields=["project", "type", "-created_at", "-key"], name="mem_project_type_idx"
            ),
            models.Index(
                fields=["session", "type", "-created_at", "-key"],
                condition=~Q(session=""),
                name="mem_session_type_idx",
            ),
            models.Index(
                fields=["sweep", "type", "-created_at", "-key"],
                condition=~Q(sweep=""),
                name="mem_sweep_type_idx",
            ),
            models.Index(
                fields=["run", "type", "-created_at", "-key"],
                condition=~Q(run=""),
                name="mem_run_type_idx",
            ),
            # "My Entries" and read_self: an agent's own entries in time order.
            models.Index(fields=["agent_id", "created_at", "key"], name="mem_agent_time_idx"),
            # Inbox and target_id queries: messages to an agent.
            models.Index(
                fields=["target_id", "created_at", "key"],
                condition=~Q(target_id=""),
                name="mem_target_time_idx",
            ),
            # A type across projects (a person's memories list), and no filter at all.
            models.Index(fields=["type", "-created_at", "-key"], name="mem_type_time_idx"),
            models.Index(fields=["-created_at", "-key"], name="mem_time_idx"),
            # Tag filters (any-of: tags && ARRAY[...]).
            GinIndex(fields=["tags"], name="mem_tags_gin_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.key} {self.type} {self.agent_id}"
