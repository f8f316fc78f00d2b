"""The machines that run `manage.py runagentd`, one row per AGENTSYS_HOST_NAME: the agents
they host point here, the scheduler books their GPUs (scheduler_app.GPU). The table keeps
the name it had in scheduler_app."""

from __future__ import annotations

from django.db import models


class HostStatus(models.TextChoices):
    ONLINE = "online", "Online"
    OFFLINE = "offline", "Offline (stopped cleanly)"
    DEAD = "dead", "Dead (stopped heart-beating)"


class Host(models.Model):
    """A machine running `manage.py runagentd`. One row per AGENTSYS_HOST_NAME."""

    name = models.CharField(max_length=63, unique=True)
    hostname = models.CharField(max_length=255, blank=True)
    status = models.CharField(max_length=16, choices=HostStatus.choices, default=HostStatus.ONLINE)
    daemon_pid = models.IntegerField(null=True, blank=True)
    daemon_started_at = models.DateTimeField(null=True, blank=True)
    last_heartbeat = models.DateTimeField(null=True, blank=True)
    version = models.CharField(max_length=40, blank=True)
    info = models.JSONField(default=dict, blank=True, help_text="Python, CPU count, platform")
    labels = models.JSONField(
        default=dict,
        blank=True,
        help_text="What runs may require of it: AGENTSYS_HOST_LABELS over its GPUs' model "
        "and memory (agentsys.scheduling)",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "scheduler_app_host"  # from before the model moved here
        ordering = ["name"]
        indexes = [
            # Finding online hosts whose heartbeat went stale (declared dead).
            models.Index(fields=["status", "last_heartbeat"], name="host_liveness_idx"),
        ]

    def __str__(self) -> str:
        return self.name
