"""The ledger: what every model step and every run cost, one row each (`SpendEntry`).

A row names what caused it by id, not by foreign key: the ledger outlives the loops, chats
and runs it tells about (deleting a chat does not unspend its money), and the apps that
write it (the chat, the loops, the queue) all sit above it. Totals are sums of rows."""

from django.db import models
from django.utils import timezone


class SpendKind(models.TextChoices):
    LLM = "llm", "Model step"
    GPU = "gpu", "GPU run"


class SpendEntry(models.Model):
    # Unique: a step's OpenCode part id ("llm:prt_…"), a run's id ("gpu:run-…"). Recording
    # one twice (a daemon killed after its write, before it knew) keeps one row.
    key = models.CharField(max_length=200, unique=True)
    kind = models.CharField(max_length=8, choices=SpendKind.choices)
    created_at = models.DateTimeField(default=timezone.now)

    input_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    reasoning_tokens = models.BigIntegerField(default=0)
    cache_read_tokens = models.BigIntegerField(default=0)
    cache_write_tokens = models.BigIntegerField(default=0)
    # As OpenCode priced the step; exact decimals, so a total is the sum of its rows.
    usd = models.DecimalField(max_digits=16, decimal_places=8, default=0)
    model = models.CharField(max_length=200, blank=True)
    provider = models.CharField(max_length=100, blank=True)

    gpu_seconds = models.DecimalField(max_digits=16, decimal_places=3, default=0)
    gpus = models.PositiveIntegerField(default=0)
    wall_seconds = models.DecimalField(max_digits=16, decimal_places=3, default=0)
    host = models.CharField(max_length=200, blank=True)

    # What caused it: run → sweep → loop → chat session → person.
    run_id = models.CharField(max_length=40, blank=True)
    sweep_id = models.CharField(max_length=40, blank=True)
    loop_id = models.CharField(max_length=64, blank=True, help_text="The research loop's agent")
    agent_id = models.CharField(max_length=64, blank=True, help_text="The agent that spent it")
    chat_session_id = models.CharField(max_length=40, blank=True)
    chat_turn_id = models.CharField(max_length=40, blank=True)
    user_id = models.IntegerField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "spend entries"
        indexes = [
            # The Spend page and /api/ledger: entries since a day, grouped.
            models.Index(fields=["created_at"], name="spend_created_idx"),
            models.Index(fields=["loop_id", "created_at"], name="spend_loop_idx"),
            models.Index(fields=["chat_session_id", "created_at"], name="spend_session_idx"),
            models.Index(fields=["user_id", "created_at"], name="spend_user_idx"),
            models.Index(fields=["run_id"], name="spend_run_idx"),
        ]

    def __str__(self):
        return f"{self.kind} {self.key}"

    @property
    def tokens(self) -> int:
        return (
            self.input_tokens
            + self.output_tokens
            + self.reasoning_tokens
            + self.cache_read_tokens
            + self.cache_write_tokens
        )


class SpendDay(models.Model):
    """A UTC day's sums of the entries with one cause: what /api/ledger and the Spend page
    group, instead of 10^6 entries. Kept by PostgreSQL triggers on SpendEntry (migration
    0002), in the statement that inserts, updates or deletes entries: every way an entry is
    written (a service, an admin delete, a test's update, a bulk load) keeps the sums exact,
    and a rolled-back entry takes its sums with it. Never written from Python."""

    day = models.DateField()
    loop_id = models.CharField(max_length=64, blank=True)
    chat_session_id = models.CharField(max_length=40, blank=True)
    user_id = models.IntegerField(null=True, blank=True)
    sweep_id = models.CharField(max_length=40, blank=True)
    model = models.CharField(max_length=200, blank=True)
    host = models.CharField(max_length=200, blank=True)

    # Sums of the entries' columns; wide enough for 10^8 entries at their columns' maxima.
    llm_tokens = models.BigIntegerField(default=0)
    llm_usd = models.DecimalField(max_digits=28, decimal_places=8, default=0)
    gpu_seconds = models.DecimalField(max_digits=28, decimal_places=3, default=0)
    entries = models.BigIntegerField(default=0)

    class Meta:
        # The triggers' ON CONFLICT target; no person (NULL) is one group, as in GROUP BY.
        constraints = [
            models.UniqueConstraint(
                fields=[
                    "day",
                    "loop_id",
                    "chat_session_id",
                    "user_id",
                    "sweep_id",
                    "model",
                    "host",
                ],
                name="spendday_group_uniq",
                nulls_distinct=False,
            ),
        ]

    def __str__(self):
        return f"{self.day} {self.loop_id or self.chat_session_id or self.host}"
