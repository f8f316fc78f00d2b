"""Reading runs' metric series, downsampled on the server.

A chart is a few hundred pixels wide: sending it 10^6 points wastes the wire and the browser.
A series with more points than asked for is cut into `max_points // 2` step buckets, and each
bucket sends its lowest and its highest finite point (min/max decimation: a spike or a dip one
step wide survives, where averaging or every-Nth sampling would hide it), plus its first NaN,
+inf and -inf point, so a divergence is never smoothed away. All of it is one aggregate in
PostgreSQL over the (series, step) index: `min(ARRAY[value, step])` picks a bucket's lowest
point and its step without sorting the bucket.

JSON has no NaN or infinity: such values travel as the strings "NaN", "Infinity", "-Infinity".
"""

from __future__ import annotations

import math
from typing import Any

from django.db import connection

from scheduler_app.models import MetricSeries

DEFAULT_MAX_POINTS = 2000
MAX_MAX_POINTS = 20_000
NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


_RAW = """
SELECT step, value FROM scheduler_app_metricpoint
WHERE series_id = %(series)s AND step >= %(since)s
ORDER BY step, id
"""

_COUNT_UP_TO = """
SELECT count(*) FROM (
  SELECT 1 FROM scheduler_app_metricpoint
  WHERE series_id = %(series)s AND step >= %(since)s LIMIT %(limit)s
) AS capped
"""

# `bounds` is MATERIALIZED: computed once. Inlined, a planner whose statistics say the table
# is empty (analyzed when it held no live row, before the points came) put it inside the join's
# loop: the min/max over the series ran once a point, 20,000 points took 84 s instead of 16 ms.
_BUCKETED = """
WITH bounds AS MATERIALIZED (
  SELECT min(step) AS lo, max(step) AS hi FROM scheduler_app_metricpoint
  WHERE series_id = %(series)s AND step >= %(since)s
)
SELECT
  min(ARRAY[value, step::float8]) FILTER (WHERE value NOT IN ('NaN', 'Infinity', '-Infinity')),
  max(ARRAY[value, step::float8]) FILTER (WHERE value NOT IN ('NaN', 'Infinity', '-Infinity')),
  min(step) FILTER (WHERE value = 'NaN'),
  min(step) FILTER (WHERE value = 'Infinity'),
  min(step) FILTER (WHERE value = '-Infinity')
FROM scheduler_app_metricpoint, bounds
WHERE series_id = %(series)s AND step >= %(since)s
GROUP BY width_bucket(step::float8, lo::float8, hi::float8 + 1, %(buckets)s)
"""


def json_value(value: float) -> float | str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def series_points(
    series: MetricSeries, *, since_step: int | None = None, max_points: int = DEFAULT_MAX_POINTS
) -> dict[str, Any]:
    """One series from `since_step` on: every point if there are at most `max_points`,
    otherwise min/max buckets (see the module docstring)."""
    since = since_step if since_step is not None else -(2**63)
    params = {"series": series.pk, "since": since}
    with connection.cursor() as cursor:
        if since_step is None:
            total = series.points
        else:
            cursor.execute(_COUNT_UP_TO, {**params, "limit": max_points + 1})
            total = cursor.fetchone()[0]
        downsampled = total > max_points
        if downsampled:
            cursor.execute(_BUCKETED, {**params, "buckets": max(1, max_points // 2)})
            points = sorted(_bucket_points(cursor.fetchall()))
        else:
            cursor.execute(_RAW, params)
            points = cursor.fetchall()
    return {
        "key": series.key,
        "source": series.source,
        "points": series.points,
        "returned": len(points),
        "downsampled": downsampled,
        "first_step": series.first_step,
        "last_step": series.last_step,
        "last_value": None if series.last_value is None else json_value(series.last_value),
        "min_value": series.min_value,
        "max_value": series.max_value,
        "non_finite": series.non_finite,
        "steps": [step for step, _ in points],
        "values": [json_value(value) for _, value in points],
    }


def _bucket_points(rows) -> set[tuple[int, float]]:
    points: set[tuple[int, float]] = set()
    for low, high, nan_step, inf_step, minus_inf_step in rows:
        for pair in (low, high):
            if pair is not None:
                points.add((int(pair[1]), pair[0]))
        for step, value in (
            (nan_step, math.nan),
            (inf_step, math.inf),
            (minus_inf_step, -math.inf),
        ):
            if step is not None:
                points.add((step, value))
    return points


def run_series(
    *,
    run_id: str,
    keys: list[str] | None = None,
    since_step: int | None = None,
    max_points: int = DEFAULT_MAX_POINTS,
) -> list[dict[str, Any]]:
    """A run's series (all of them, or those named), by key."""
    found = MetricSeries.objects.filter(run_id=run_id).order_by("key")
    if keys:
        found = found.filter(key__in=keys)
    return [series_points(s, since_step=since_step, max_points=max_points) for s in found]


def runs_series(
    *, run_ids: list[str], key: str, max_points: int = DEFAULT_MAX_POINTS
) -> dict[str, dict[str, Any]]:
    """Key K of several runs (compare), by run id; a run that never logged K is absent."""
    found = MetricSeries.objects.filter(run_id__in=run_ids, key=key)
    return {s.run_id: series_points(s, max_points=max_points) for s in found}
