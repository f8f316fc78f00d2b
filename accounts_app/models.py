from django.conf import settings
from django.db import models


class ApiToken(models.Model):
    """A user's API token. Only its SHA-256 digest is kept: the token itself is shown once,
    when it is created, and cannot be recovered (a lost one is revoked and replaced).

    An agent's token (agent_id set) belongs to the `agents` service user: a research loop
    gets one at its start, for the run tools of its workdir's MCP server, and loses it at its
    end (accounts_app.services.issue_agent_token, revoke_agent_tokens)."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100, help_text="What it is for, e.g. 'laptop scripts'")
    prefix = models.CharField(max_length=16, editable=False, help_text="Its first characters")
    digest = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)
    agent_id = models.CharField(
        max_length=64,
        blank=True,
        db_index=True,
        editable=False,
        help_text="The agent it was issued to; empty for a person's own token",
    )

    class Meta:
        ordering = ["user_id", "-created_at"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def active(self) -> bool:
        return self.revoked_at is None


class PersonSettings(models.Model):
    """A person's own settings, one row each, made when they first save one: the default
    budget of the research loops they start (issue 38 §2; the tightest of a loop's own, its
    chat's and this one applies: agentsys.research.budget.tightest)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        primary_key=True,
        on_delete=models.CASCADE,
        related_name="agentsys_settings",
    )
    default_budget = models.JSONField(
        default=dict,
        blank=True,
        help_text="Caps of their loops, as a loop's budget ({}: none)",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "person's settings"
        verbose_name_plural = "people's settings"

    def __str__(self) -> str:
        return f"settings of {self.user}"
