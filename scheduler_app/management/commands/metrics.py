"""`manage.py metrics compact --older-than-days 30`: thin the metric points stored before then,
keeping what a chart of them shows (scheduler_app/metrics/compaction.py). runagentd does the
same on its own once a day when AGENTSYS_METRICS_COMPACT_AFTER_DAYS is set."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.core.management.base import BaseCommand, CommandError

from scheduler_app.metrics.compaction import DEFAULT_STRETCHES, compact_old_points


class Command(BaseCommand):
    help = "Thin old metric points, keeping each chart's shape (spikes, NaNs, extremes)."

    def add_arguments(self, parser):
        actions = parser.add_subparsers(dest="action", required=True)
        compact = actions.add_parser("compact", help="Thin the points stored before a day")
        compact.add_argument("--older-than-days", type=float, required=True)
        compact.add_argument(
            "--stretches",
            type=int,
            default=DEFAULT_STRETCHES,
            help="Stretches of steps the old part of a series is cut into; each keeps its "
            "first, last, lowest and highest point (and every NaN and inf)",
        )

    def handle(self, *args, action, older_than_days, stretches, **options):
        if older_than_days <= 0:
            raise CommandError("--older-than-days: must be a positive number")
        if stretches < 1:
            raise CommandError("--stretches: must be at least 1")
        before = datetime.now(UTC) - timedelta(days=older_than_days)
        done = compact_old_points(before=before, stretches=stretches)
        if done.skipped:
            raise CommandError(f"Nothing done: {done.skipped}")
        self.stdout.write(
            f"Thinned {done.series} metric series stored before {before:%Y-%m-%d %H:%M} UTC: "
            f"{done.deleted} points deleted"
        )
