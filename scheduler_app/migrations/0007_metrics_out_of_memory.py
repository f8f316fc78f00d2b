"""Every metrics memory entry (one per agent_metrics.jsonl row, as stored before series
existed) becomes points of its run's series, and leaves memory."""

import math

from django.db import migrations

from scheduler_app.metrics.series import series_of

BATCH = 5000
# json_safe stored a NaN or infinite value as its name.
NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _summary(points):
    finite = [value for _, value, _ in points if math.isfinite(value)]
    last_step, last_value, _ = max(points, key=lambda point: point[0])
    return {
        "points": len(points),
        "first_step": min(step for step, _, _ in points),
        "last_step": last_step,
        "last_value": last_value,
        "min_value": min(finite) if finite else None,
        "max_value": max(finite) if finite else None,
        "non_finite": len(points) - len(finite),
    }


def entries_to_series(apps, schema_editor):
    MemoryEntry = apps.get_model("memory_app", "MemoryEntry")
    Run = apps.get_model("scheduler_app", "Run")
    MetricSeries = apps.get_model("scheduler_app", "MetricSeries")
    MetricPoint = apps.get_model("scheduler_app", "MetricPoint")
    entries = MemoryEntry.objects.filter(type="metrics")
    for agent_id in entries.order_by().values_list("agent_id", flat=True).distinct():
        rows = entries.filter(agent_id=agent_id).order_by("created_at", "key")
        run_ids = set(rows.exclude(run="").values_list("run", flat=True))
        run = Run.objects.filter(pk__in=run_ids).first()
        by_key: dict[str, list] = {}
        next_steps: dict[str, int] = {}
        for entry in rows.iterator(chunk_size=BATCH):
            if not isinstance(entry.data, dict):
                continue
            row = {
                k: NON_FINITE.get(v, v) if isinstance(v, str) else v for k, v in entry.data.items()
            }
            for key, batch in series_of([row], next_steps).items():
                stamped = [(step, value, entry.created_at) for step, value, _ in batch.points]
                by_key.setdefault(key, []).extend(stamped)
        for key, points in by_key.items():
            series = MetricSeries.objects.create(
                agent_id=agent_id, run=run, key=key, **_summary(points)
            )
            MetricPoint.objects.bulk_create(
                (MetricPoint(series=series, step=s, value=v, time=t) for s, v, t in points),
                batch_size=BATCH,
            )
    entries.delete()


class Migration(migrations.Migration):
    dependencies = [
        ("scheduler_app", "0006_metric_series"),
        ("memory_app", "0002_memory_query_indexes"),
    ]

    operations = [migrations.RunPython(entries_to_series, migrations.RunPython.noop)]
