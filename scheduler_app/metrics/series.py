"""Storing a run's metric rows as series (writes; reads are in metrics.queries).

A row is what the training script appended to agent_metrics.jsonl, W&B-style:
{"_step": 10, "loss": 1.2, "lr": 0.001}. Each numeric field becomes a point of the series of
that name; the step is the row's `_step` / `step` / `global_step`, or, in a row without one,
one step for all of its fields: the first step past every one of their series (so the fields
of one logged row always share a step). Fields starting with "_" (W&B's _timestamp,
_runtime) and values that are not numbers (strings, bools, lists) are not series.
`_timestamp` (seconds since the epoch), when present, is the point's time; otherwise the time
it was stored.

Points go in with COPY (a 500-row batch is one round trip; 10^6 points take seconds, not
minutes) and each series' summary (count, first/last step, last value, finite min/max) is
updated in the same transaction, so the runs list's "last loss" never disagrees with the chart.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from agentsys.metrics import STEP_KEYS, stored_step
from scheduler_app.models import MetricPoint, MetricSeries, Run
from scheduler_app.run_news import runs_changed

MAX_KEY_LENGTH = 200


@dataclass
class _Batch:
    """The points of one series in one write, with the summary they add."""

    points: list[tuple[int, float, datetime]] = field(default_factory=list)

    def add(self, step: int, value: float, at: datetime) -> None:
        self.points.append((step, value, at))


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return float(value)
    except OverflowError:  # an int too big for a float
        return math.copysign(math.inf, value)


def _time(row: dict[str, Any], now: datetime) -> datetime:
    stamp = _number(row.get("_timestamp"))
    if stamp is None or not math.isfinite(stamp):
        return now
    try:
        return datetime.fromtimestamp(stamp, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return now


def series_of(rows: list[dict[str, Any]], next_steps: dict[str, int]) -> dict[str, _Batch]:
    """Rows → points per series name. `next_steps` holds, per series, the step a row without
    one gets; it is advanced in place."""
    now = timezone.now()
    batches: dict[str, _Batch] = {}
    for row in rows:
        points = {}
        for key, raw in row.items():
            if not isinstance(key, str) or key.startswith("_") or key in STEP_KEYS:
                continue
            value = _number(raw)
            if value is not None:
                points[key[:MAX_KEY_LENGTH]] = value
        if not points:
            continue
        step = stored_step(row)
        if step is None:  # one step for the whole row: past every one of its series
            step = max(next_steps.get(key, 0) for key in points)
        at = _time(row, now)
        for key, value in points.items():
            next_steps[key] = max(next_steps.get(key, 0), step + 1)
            batches.setdefault(key, _Batch()).add(step, value, at)
    return batches


def record_rows(
    *, agent_id: str, run_id: str, rows: list[dict[str, Any]], source: str = "jsonl"
) -> int:
    """Store a batch of an executor's metric rows read from `source`; returns the number of
    points stored. A series has one source, so a script that logs `loss` to TensorBoard and
    prints it too gets one loss curve, not each point twice: the first source to write it
    keeps it, except that printed lines give way to any structured logger (whose writer may
    flush minutes after the print), which then starts the series afresh."""
    if not rows:
        return 0
    run_id = run_id if run_id and Run.objects.filter(pk=run_id).exists() else None
    with transaction.atomic():
        existing = {
            s.key: s for s in MetricSeries.objects.select_for_update().filter(agent_id=agent_id)
        }
        if source != PRINTED:
            for key in _keys_of(rows) & existing.keys():
                if existing[key].source == PRINTED:
                    _start_afresh(existing[key], source)
        next_steps = {
            key: s.last_step + 1 for key, s in existing.items() if s.last_step is not None
        }
        batches = {
            key: batch
            for key, batch in series_of(rows, next_steps).items()
            if key not in existing or existing[key].source in ("", source)
        }
        missing = [
            MetricSeries(agent_id=agent_id, run_id=run_id, key=key, source=source)
            for key in batches
            if key not in existing
        ]
        if missing:
            MetricSeries.objects.bulk_create(missing, ignore_conflicts=True)
            existing = {
                s.key: s for s in MetricSeries.objects.select_for_update().filter(agent_id=agent_id)
            }
        _copy_points((existing[key].pk, batch) for key, batch in batches.items())
        for key, batch in batches.items():
            _summarise(existing[key], batch)
        MetricSeries.objects.bulk_update(
            [existing[key] for key in batches],
            [
                "points",
                "first_step",
                "last_step",
                "last_value",
                "min_value",
                "max_value",
                "non_finite",
                "updated_at",
            ],
        )
        if batches and run_id:
            runs_changed([run_id])  # its waiters (wait_runs) hear of it at commit
    return sum(len(batch.points) for batch in batches.values())


PRINTED = "stdout"  # the source that gives way to every other


def _keys_of(rows: list[dict[str, Any]]) -> set[str]:
    return {key[:MAX_KEY_LENGTH] for row in rows for key in row if isinstance(key, str)}


def _start_afresh(series: MetricSeries, source: str) -> None:
    """A series read from printed lines, taken over by a structured source."""
    MetricPoint.objects.filter(series=series).delete()
    series.source, series.points, series.non_finite = source, 0, 0
    series.first_step = series.last_step = series.last_value = None
    series.min_value = series.max_value = None
    series.save()


def _copy_points(batches) -> None:
    table = MetricPoint._meta.db_table
    statement = f"COPY {table} (series_id, step, value, time) FROM STDIN"
    with connection.cursor() as cursor, cursor.cursor.copy(statement) as copy:
        for series_id, batch in batches:
            for step, value, at in batch.points:
                copy.write_row((series_id, step, value, at))


def _summarise(series: MetricSeries, batch: _Batch) -> None:
    steps = [step for step, _, _ in batch.points]
    finite = [value for _, value, _ in batch.points if math.isfinite(value)]
    series.points += len(batch.points)
    series.non_finite += len(batch.points) - len(finite)
    first = min(steps)
    series.first_step = first if series.first_step is None else min(series.first_step, first)
    last_step, last_value, _ = max(batch.points, key=lambda point: point[0])
    if series.last_step is None or last_step >= series.last_step:
        series.last_step, series.last_value = last_step, last_value
    if finite:
        low, high = min(finite), max(finite)
        series.min_value = low if series.min_value is None else min(series.min_value, low)
        series.max_value = high if series.max_value is None else max(series.max_value, high)
    series.updated_at = timezone.now()
