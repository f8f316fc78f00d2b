"""Old metric points thinned on a schedule (AGENTSYS_METRICS_COMPACT_AFTER_DAYS; issue 40 §2),
so that months of history do not grow the points table without end.

What stays of a series: every point stored in the last `older_than` (its newest points), its
newest point whatever its age, and of the points older than that, split by step into
`stretches` equal stretches: each stretch's first and last point, its lowest and highest finite
value, and every NaN and ±inf. A chart of the old steps, drawn at up to `stretches` points
wide, looks as it did (a one-step spike, a divergence, a NaN are all still there); the series'
summary (first and last step, last value, finite min and max, count of non-finite points) is
unchanged but for its count of points.

One pass at a time over the whole database (a PostgreSQL advisory lock: every runagentd may
try, one does it); each series is thinned in a transaction of its own, so a pass over a large
table never holds one long transaction, and a pass cut short (a stop, an outage) leaves every
series either thinned or as it was.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import connection, transaction

from scheduler_app.models import MetricSeries

COMPACTION_LOCK = 0x4D455452  # pg advisory lock key ("METR"): one pass at a time
KEPT_PER_STRETCH = 4  # first, last, lowest, highest: a series with fewer old points is left
# A chart is at most ~2,000 points wide (the run page asks for 1,000): the old part of a series
# keeps up to 4 points a stretch, 8,000 in all, whatever its length.
DEFAULT_STRETCHES = 2000

# Planner-proof: `span` is computed once (MATERIALIZED) and the ids to delete are gathered
# once (ARRAY(...)), then found by primary key. Written as a join, statistics saying the table
# was empty led the planner to rank the stretch again for every point: 5,000 points, 80 s.
_THIN = """
WITH old AS (
    SELECT id, step,
           CASE WHEN value IN ('NaN'::float8, 'Infinity'::float8, '-Infinity'::float8)
                THEN NULL ELSE value END AS finite
    FROM scheduler_app_metricpoint
    WHERE series_id = %(series)s AND time < %(before)s
), span AS MATERIALIZED (
    SELECT min(step) AS low, max(step) AS high FROM old
), placed AS (
    SELECT old.id, old.step, old.finite,
           floor((old.step - span.low)::numeric * %(stretches)s
                 / (span.high - span.low + 1)) AS stretch
    FROM old, span
), ranked AS (
    SELECT id, finite,
           row_number() OVER (PARTITION BY stretch ORDER BY step, id) AS first_rank,
           row_number() OVER (PARTITION BY stretch ORDER BY step DESC, id DESC) AS last_rank,
           row_number() OVER (PARTITION BY stretch ORDER BY finite ASC NULLS LAST, step)
               AS low_rank,
           row_number() OVER (PARTITION BY stretch ORDER BY finite DESC NULLS LAST, step)
               AS high_rank
    FROM placed
)
DELETE FROM scheduler_app_metricpoint
WHERE id = ANY(ARRAY(
    SELECT id FROM ranked
    WHERE finite IS NOT NULL
      AND first_rank > 1 AND last_rank > 1 AND low_rank > 1 AND high_rank > 1
))
  AND id <> (
      SELECT id FROM scheduler_app_metricpoint
      WHERE series_id = %(series)s ORDER BY step DESC, id DESC LIMIT 1
  )
"""


@dataclass(frozen=True)
class Compaction:
    series: int  # series thinned
    deleted: int  # points deleted
    skipped: str = ""  # why it did nothing, or stopped early ("" when the pass ran through)


def compact_old_points(*, before: datetime, stretches: int, stop=None) -> Compaction:
    """Thin the points stored before `before` (see the module docstring). Series with at most
    `stretches` x 4 points in all are not looked at: there is nothing to gain. `stop` (a
    threading.Event) set: the pass ends after the series it is on (a stopping runagentd)."""
    if stretches < 1:
        raise ValueError(f"stretches must be at least 1, got {stretches}")
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [COMPACTION_LOCK])
        if not cursor.fetchone()[0]:
            return Compaction(0, 0, "another compaction is running")
    try:
        thinned = deleted = 0
        candidates = MetricSeries.objects.filter(points__gt=stretches * KEPT_PER_STRETCH)
        for series_id in candidates.order_by("pk").values_list("pk", flat=True).iterator():
            if stop is not None and stop.is_set():
                return Compaction(thinned, deleted, "stopped: runagentd is stopping")
            gone = _thin(series_id, before, stretches)
            thinned += bool(gone)
            deleted += gone
        return Compaction(thinned, deleted)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [COMPACTION_LOCK])


def _thin(series_id: int, before: datetime, stretches: int) -> int:
    with transaction.atomic():
        # Locked: a write to the series (series.record_rows) waits, and its summary stays true.
        MetricSeries.objects.select_for_update().filter(pk=series_id).exists()
        with connection.cursor() as cursor:
            params = {"series": series_id, "before": before, "stretches": stretches}
            cursor.execute(_THIN, params)
            gone = cursor.rowcount
        if gone:
            series = MetricSeries.objects.get(pk=series_id)
            series.points = max(0, series.points - gone)
            series.save(update_fields=["points"])
        return gone
