"""SweepRung: who reached which rung of a sweep's early stopping (agentsys.asha), with what
value, and what was decided. Its own module, imported by scheduler_app.models, because the
models module is long enough; it is one of the app's models all the same."""

from __future__ import annotations

from django.db import models


class SweepRung(models.Model):
    """A run judged at a rung: once per (run, rung), in the order the runs got there. The
    values of a rung's rows are the cut-off of every later run judged there."""

    id = models.BigAutoField(primary_key=True)
    sweep = models.ForeignKey("scheduler_app.Sweep", on_delete=models.CASCADE, related_name="+")
    run = models.ForeignKey("scheduler_app.Run", on_delete=models.CASCADE, related_name="rungs")
    rung = models.PositiveIntegerField(help_text="The step of the rung")
    step = models.BigIntegerField(help_text="The step of the value judged (at or past the rung)")
    value = models.FloatField(help_text="The metric there; NaN and ±inf as they came")
    kept = models.BooleanField(help_text="It went on; False: it was stopped here")
    cutoff = models.FloatField(null=True, blank=True, help_text="None: the first there")
    words = models.TextField(help_text="The decision, as stopped_by says it")
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "rung"], name="sweep_rung_once_per_run"),
        ]
        indexes = [models.Index(fields=["sweep", "rung"], name="sweep_rung_idx")]

    def __str__(self) -> str:
        return f"{self.run_id} at rung {self.rung}: {'kept' if self.kept else 'stopped'}"
