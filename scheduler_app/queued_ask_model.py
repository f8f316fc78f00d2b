"""QueuedAsk: each account's queued GPUs as last summed, for fair share (agentsys.fair_share
weighs a person's turn by what they ask for in all). Its own module, imported by
scheduler_app.models, because the models module is long enough."""

from __future__ import annotations

from django.db import models


class QueuedAsk(models.Model):
    """One row per account with queued requests when summed (scheduler_app.queue.queued_gpus:
    one claimer of the whole cluster sums the queue every few seconds; claims read it)."""

    account = models.CharField(max_length=150, primary_key=True, blank=True)
    gpus = models.BigIntegerField(help_text="GPUs its queued requests ask for, SLURM's aside")
    summed_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.account or '(no person)'}: {self.gpus} GPUs queued"
