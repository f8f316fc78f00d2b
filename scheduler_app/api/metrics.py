"""REST for runs' metric series: one run's series, and one key across runs (compare).

Mounted before the runs router, so that /runs/metrics is not read as the run "metrics"."""

from __future__ import annotations

from typing import Any

from ninja import Field, Query, Router, Schema, Status

from scheduler_app.metrics import queries as metric_queries
from scheduler_app.models import Run

router = Router(tags=["runs"])
MAX_COMPARED = 50
MAX_KEYS = 100
STEP_BOUND = 2**63 - 1


class ErrorOut(Schema):
    detail: str


class SeriesOut(Schema):
    key: str
    source: str = Field(
        "", description="Where the run logged it: jsonl, tensorboard, mlflow, wandb or stdout"
    )
    points: int
    returned: int
    downsampled: bool
    first_step: int | None
    last_step: int | None
    last_value: float | str | None
    min_value: float | None
    max_value: float | None
    non_finite: int
    steps: list[int]
    values: list[float | str]


class RunMetricsOut(Schema):
    run_id: str
    series: list[SeriesOut]


class ComparedRunOut(Schema):
    run_id: str
    name: str
    status: str
    series: SeriesOut | None


class CompareOut(Schema):
    key: str
    runs: list[ComparedRunOut]


def _names(text: str | None, *, what: str, most: int) -> list[str]:
    names = [name.strip() for name in (text or "").split(",") if name.strip()]
    if len(names) > most:
        raise ValueError(f"at most {most} {what}, got {len(names)}")
    return list(dict.fromkeys(names))


MAX_POINTS_HELP = (
    "Most points per series (default 2000); a longer series comes in min/max buckets that "
    "keep its spikes and NaNs"
)


@router.get(
    "/runs/metrics",
    response={200: CompareOut, 400: ErrorOut},
    summary="One metric of several runs, to overlay (compare)",
)
def compare_runs(
    request,
    ids: str = Query(..., max_length=4000, description="Run ids, comma-separated"),
    key: str = Query(..., min_length=1, max_length=200, description="The metric, e.g. loss"),
    max_points: int = Query(
        metric_queries.DEFAULT_MAX_POINTS,
        ge=2,
        le=metric_queries.MAX_MAX_POINTS,
        description=MAX_POINTS_HELP,
    ),
):
    try:
        run_ids = _names(ids, what="runs", most=MAX_COMPARED)
    except ValueError as error:
        return Status(400, {"detail": str(error)})
    if not run_ids:
        return Status(400, {"detail": "ids: name at least one run"})
    runs = {run.pk: run for run in Run.objects.filter(pk__in=run_ids)}
    unknown = [run_id for run_id in run_ids if run_id not in runs]
    if unknown:
        return Status(400, {"detail": f"no run {', '.join(map(repr, unknown))}"})
    series = metric_queries.runs_series(run_ids=run_ids, key=key, max_points=max_points)
    return {
        "key": key,
        "runs": [
            {
                "run_id": run_id,
                "name": runs[run_id].name,
                "status": runs[run_id].status,
                "series": series.get(run_id),
            }
            for run_id in run_ids
        ],
    }


@router.get(
    "/runs/{run_id}/metrics",
    response={200: RunMetricsOut, 400: ErrorOut, 404: ErrorOut},
    summary="A run's metric series by step (all keys, or those named)",
)
def run_metrics(
    request,
    run_id: str,
    # Not named `keys`: ninja reads the parameters as a mapping, whose keys() it would hide.
    key_list: str | None = Query(
        None, alias="keys", max_length=4000, description="Keys, comma-separated"
    ),
    since_step: int | None = Query(
        None, ge=-STEP_BOUND, le=STEP_BOUND, description="Only points at this step or later"
    ),
    max_points: int = Query(
        metric_queries.DEFAULT_MAX_POINTS,
        ge=2,
        le=metric_queries.MAX_MAX_POINTS,
        description=MAX_POINTS_HELP,
    ),
):
    if not Run.objects.filter(pk=run_id).exists():
        return Status(404, {"detail": f"no run {run_id!r}"})
    try:
        names = _names(key_list, what="keys", most=MAX_KEYS)
    except ValueError as error:
        return Status(400, {"detail": str(error)})
    series: list[dict[str, Any]] = metric_queries.run_series(
        run_id=run_id, keys=names or None, since_step=since_step, max_points=max_points
    )
    return {"run_id": run_id, "series": series}
