"""A research loop: the L2 ResearchAgent's row, its sweep (the runs of its
experiments) and the state it saves after every step (the research_state event)."""

from django.db import models


class ResearchLoop(models.Model):
    agent = models.OneToOneField(
        "agents_app.Agent",
        primary_key=True,
        on_delete=models.CASCADE,
        related_name="research_loop",
        help_text="The research agent; its status is the loop's",
    )
    sweep = models.ForeignKey(
        "scheduler_app.Sweep",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="research_loops",
        help_text="Every experiment of the loop is a run of this sweep",
    )
    chat_session = models.ForeignKey(
        "sessions_app.ChatSession",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="research_loops",
    )
    goal = models.TextField()
    settings = models.JSONField(default=dict, blank=True)
    state = models.JSONField(default=dict, blank=True, help_text="Saved after every step")
    iteration = models.PositiveIntegerField(default=0)
    plan = models.TextField(blank=True)
    reflection = models.TextField(blank=True)
    opencode_session_id = models.CharField(max_length=100, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.goal[:60]} ({self.agent_id})"
