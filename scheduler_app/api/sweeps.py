"""REST for sweeps: list them (a research loop's, a person's), make one for runs to join, and
read one as a table of its runs, params against metrics (scheduler_app.sweeps.table), as JSON
or CSV."""

from __future__ import annotations

import csv
import io
import math
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from django.http import HttpResponse
from ninja import Field, Query, Router, Schema, Status
from pydantic import ConfigDict, StringConstraints, field_validator

from accounts_app.auth import agent_of
from agentsys import asha
from agentsys.metric_sources.stdout import MAX_PATTERN_LENGTH
from agentsys.run_env import check_env, check_venv
from common.api_contract import MAX_OFFSET
from scheduler_app import selectors
from scheduler_app.api.run_input import (
    STOP_WHEN_HELP,
    SlurmOptionsIn,
    check_metrics_pattern,
    check_stop_when,
)
from scheduler_app.metrics.queries import json_value
from scheduler_app.models import Sweep, SweepKind, SweepStatus
from scheduler_app.sweeps.groups import Group
from scheduler_app.sweeps.table import (
    MISSING,
    BadTableQuery,
    Table,
    grouped_table,
    seed_columns,
    sweep_table,
    value_of,
)

router = Router(tags=["sweeps"])

SORT_HELP = (
    "A column id (`name`, `status`, `created_at`, `duration_s`, `exit_code`, `param.<name>`, "
    "`metric.<key>.last|min|max`), `-` first for descending. Numbers first, then strings, "
    "then NaN, then runs without a value (these last either way); ties newest first."
)
WHERE_HELP = (
    "`<column>:<op>:<value>`, repeatable (all must hold): eq, ne, contains, lt, le, gt, ge, "
    "between (`low,high`), e.g. `param.optimizer:eq:adam`, `metric.loss.last:between:0,0.5`"
)


EARLY_STOP_EXAMPLE = {
    "type": "asha",
    "metric": "loss",
    "mode": "min",
    "grace_steps": 1,
    "reduction": 3,
    "max_steps": 81,
}
EARLY_STOP_HELP = (
    "Early stopping across its runs, asynchronous successive halving as Ray Tune's ASHA: "
    "rungs at grace_steps·reduction^k steps below max_steps; a run reaching a rung goes on "
    "only if its `metric` is in the top 1/reduction of the runs that reached it before it, "
    "else it ends `stopped`, its stopped_by naming the rung and the cut-off. mode (min), "
    "grace_steps (1) and reduction (3) have defaults; GET /api/sweeps/{id}/rungs shows them"
)


class SweepIn(Schema):
    model_config = ConfigDict(extra="forbid")

    name: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]
    goal: Annotated[str, StringConstraints(max_length=5000)] = ""
    metrics_pattern: Annotated[str, StringConstraints(max_length=MAX_PATTERN_LENGTH)] | None = (
        Field(None, description="Read on the printed lines of runs that bring no pattern")
    )

    backend: Literal["subprocess", "slurm"] | None = Field(
        None, description="Where its runs go unless they say (unset: AGENTSYS_RUN_BACKEND)"
    )
    slurm: SlurmOptionsIn | None = Field(None, description="sbatch options of its SLURM runs")
    env: dict[str, Any] | None = Field(
        None, description="Environment variables of its runs, under each run's own env"
    )
    venv: str | None = Field(None, description="The virtual environment of runs naming none")
    stop_when: list[Any] | None = Field(
        None, max_length=50, description=STOP_WHEN_HELP + " (of its runs that bring none)"
    )

    early_stop: dict[str, Any] | None = Field(
        None, description=EARLY_STOP_HELP, json_schema_extra={"example": EARLY_STOP_EXAMPLE}
    )

    _stop_rules_read = field_validator("stop_when")(check_stop_when)
    _early_stop_read = field_validator("early_stop")(asha.parse)
    _metrics_pattern_compiles = field_validator("metrics_pattern")(check_metrics_pattern)
    _env_is_variables = field_validator("env")(check_env)
    _venv_is_a_path = field_validator("venv")(check_venv)


class SweepOut(Schema):
    id: str
    name: str
    goal: str
    status: str
    kind: str = Field(description="research (a research loop's experiments) or manual")
    loop_id: str | None = Field(description="The research loop's agent id, for a loop's sweep")
    run_count: int
    metrics_pattern: str
    backend: str = Field(description="Where its runs go unless they say; empty: the default")
    slurm: dict[str, str] = Field(description="sbatch options of its SLURM runs")
    env: dict[str, str] = Field(description="Environment variables of its runs")
    venv: str = Field(description="The virtual environment of its runs; empty: the workdir's")
    stop_when: list[dict[str, Any]] = Field(description="Stop rules of its runs that bring none")
    early_stop: dict[str, Any] | None = Field(description="Its early stopping (ASHA); null: none")
    created_at: datetime
    updated_at: datetime
    url: str = Field(description="Its page")
    api_url: str = Field(description="Where GET reads it again")


class ColumnOut(Schema):
    id: str
    kind: Literal["run", "param", "metric"]
    label: str
    type: str = Field(description="number, string, mixed (a param with both) or date")
    key: str | None = None
    stat: str | None = None


class GroupOut(Schema):
    id: str
    params: dict[str, Any] = Field(description="The params its runs share (no seed)")
    seeds: list[Any] = Field(description="Each run's seed (null: none), as run_ids")
    run_ids: list[str] = Field(description="Its runs, in the table's order (in rows)")
    count: int = Field(description="Its runs that pass the filters")
    statuses: dict[str, int] = Field(description="How many of its runs are in each status")
    metrics: dict[str, dict[str, dict[str, Any]]] = Field(
        description="{key: {last|min|max: {mean, std (sample, n-1), min, max, n, bad, "
        "count}}}: over its done runs only; n: those with a finite value, bad: those with "
        "NaN or ±inf, count: all its runs"
    )


class SweepTableOut(Schema):
    sweep: SweepOut
    columns: list[ColumnOut]
    total: int = Field(description="Rows that pass the filters")
    run_count: int = Field(description="Every run of the sweep")
    offset: int
    limit: int
    rows: list[dict[str, Any]] = Field(
        description="{run_id, name, status, stopped_by (the stop rule that stopped it, "
        "with the value that met it), exit_code, agent_id (its executor, whose events "
        "the live feed carries), created_at, finished_at, duration_s, "
        "url, params: {name: value}, metrics: {key: {last, min, max, last_step, points, "
        'source}}}; NaN and ±inf as "NaN", "Infinity", "-Infinity". Grouped: the runs of '
        "the page's groups"
    )
    seed_params: list[str] = Field(
        description="The param columns that hold a seed (`group=seed` groups over them)"
    )
    groups: list[GroupOut] | None = Field(
        None,
        description="With `group=seed`: runs whose params are equal but for a seed, one "
        "group each, sorted (a metric column by its mean) and paged (total counts groups)",
    )
    runs_total: int = Field(description="Runs that pass the filters")


class ErrorOut(Schema):
    detail: str


def _sweep_out(sweep) -> dict:
    return {
        "id": sweep.id,
        "name": sweep.name,
        "goal": sweep.goal,
        "status": selectors.sweep_status(sweep),
        "kind": sweep.kind,
        "loop_id": getattr(sweep, "loop_id", None),
        "run_count": getattr(sweep, "run_count", 0),
        "metrics_pattern": sweep.metrics_pattern,
        "backend": sweep.run_backend,
        "slurm": sweep.slurm_options,
        "env": sweep.run_env,
        "venv": sweep.run_venv,
        "stop_when": sweep.stop_when,
        "early_stop": sweep.early_stop or None,
        "created_at": sweep.created_at,
        "updated_at": sweep.updated_at,
        "url": f"/sweeps/{sweep.id}/",
        "api_url": f"/api/sweeps/{sweep.id}",
    }


@router.get(
    "/sweeps",
    response={200: list[SweepOut], 422: ErrorOut},
    summary="Sweeps, newest first: research loops' and those made over the API",
)
def list_sweeps(
    request,
    kind: SweepKind | None = Query(None),
    status: SweepStatus | None = Query(None),
    limit: int = Query(50, ge=1, le=500),
    offset: int = Query(0, ge=0, le=MAX_OFFSET),
):
    found = selectors.sweeps().order_by("-created_at", "-id")
    if kind:
        found = found.filter(kind=kind)
    if status:
        found = found.filter(status=status)
    return [_sweep_out(sweep) for sweep in found[offset : offset + limit]]


@router.post("/sweeps", response={201: SweepOut, 422: ErrorOut}, summary="Make a sweep")
def create_sweep(request, payload: SweepIn):
    """Runs join it with `sweep_id` in `POST /api/runs`; those without a `metrics_pattern`
    of their own read their printed lines with the sweep's."""
    user = request.user if getattr(request.user, "is_authenticated", False) else None
    sweep = Sweep.objects.create(
        name=payload.name,
        goal=payload.goal,
        metrics_pattern=payload.metrics_pattern or "",
        run_backend=payload.backend or "",
        slurm_options=payload.slurm.dict(exclude_none=True) if payload.slurm else {},
        run_env=payload.env or {},
        run_venv=payload.venv or "",
        stop_when=payload.stop_when or [],
        early_stop=payload.early_stop,
        kind=SweepKind.MANUAL,
        created_by=user,  # a loop's token acts for the person who started the loop
        created_by_agent=agent_of(request),  # ... and its runs are then the loop's to change
    )
    return Status(201, _sweep_out(selectors.sweeps().get(pk=sweep.pk)))


@router.get(
    "/sweeps/{sweep_id}",
    response={200: SweepOut, 404: ErrorOut},
    summary="One sweep: what POST /api/sweeps answered, its run count and status now",
)
def get_sweep(request, sweep_id: str):
    sweep = selectors.sweeps().filter(pk=sweep_id[:40]).first()
    if sweep is None:
        return Status(404, {"detail": f"no sweep {sweep_id[:40]!r}"})
    return _sweep_out(sweep)


@router.get(
    "/sweeps/{sweep_id}/table",
    response={200: SweepTableOut, 404: ErrorOut, 422: ErrorOut},
    summary="A sweep's runs side by side: params against metrics (JSON, or CSV)",
)
def sweep_table_view(
    request,
    sweep_id: str,
    sort: str = Query("-created_at", max_length=300, description=SORT_HELP),
    status: list[str] = Query([], description="Run statuses, comma-separated or repeated"),
    where: list[str] = Query([], description=WHERE_HELP),
    limit: int = Query(100, ge=1, le=1000),
    offset: int = Query(0, ge=0, le=MAX_OFFSET),
    format: Literal["json", "csv"] = Query("json", description="csv: every row, no paging"),
    group: Literal["none", "seed"] = Query(
        "none", description="seed: one row a group of runs equal but for a seed (not CSV)"
    ),
):
    sweep = selectors.sweeps().filter(pk=sweep_id[:40]).first()
    if sweep is None:
        return Status(404, {"detail": f"no sweep {sweep_id[:40]!r}"})
    paged = {} if format == "csv" else {"offset": offset, "limit": limit}
    try:
        if group == "seed" and format == "json":
            return _grouped(sweep, sort=sort, statuses=status, where=where, **paged)
        table = sweep_table(sweep, sort=sort, statuses=status, where=where, **paged)
    except BadTableQuery as error:
        return Status(422, {"detail": str(error)})
    if format == "csv":
        return _csv(table)
    return {
        "sweep": _sweep_out(sweep),
        "columns": table.columns,
        "total": table.total,
        "run_count": table.run_count,
        "offset": offset,
        "limit": limit,
        "rows": [_row_out(row) for row in table.rows],
        "seed_params": seed_columns(table.columns),
        "runs_total": table.total,
    }


def _grouped(sweep, **query) -> dict:
    table = grouped_table(sweep, **query)
    return {
        "sweep": _sweep_out(sweep),
        "columns": table.columns,
        "total": table.total,
        "run_count": table.run_count,
        "offset": query["offset"],
        "limit": query["limit"],
        "rows": [_row_out(row) for group in table.groups for row in group.rows],
        "seed_params": seed_columns(table.columns),
        "groups": [_group_out(group) for group in table.groups],
        "runs_total": table.runs_total,
    }


def _group_out(group: Group) -> dict:
    return {
        "id": group.id,
        "params": {k: _json(v) for k, v in group.params.items()},
        "seeds": group.seeds,
        "run_ids": group.run_ids,
        "count": len(group.rows),
        "statuses": group.statuses,
        "metrics": {
            key: {stat: {k: _json(v) for k, v in values.items()} for stat, values in by.items()}
            for key, by in group.metrics.items()
        },
    }


def _row_out(row: dict) -> dict:
    return {
        "run_id": row["run_id"],
        "name": row["name"],
        "status": row["status"],
        "stopped_by": row["stopped_by"],
        "exit_code": row["exit_code"],
        "agent_id": row["agent_id"],
        "created_at": _iso(row["created_at"]),
        "finished_at": _iso(row["finished_at"]),
        "duration_s": row["duration_s"],
        "url": f"/runs/{row['run_id']}/",
        "params": {k: _json(v) for k, v in row["params"].items()},
        "metrics": {
            key: {stat: _json(value) for stat, value in entry.items()}
            for key, entry in row["metrics"].items()
        },
    }


def _iso(epoch: float | None) -> str | None:
    """As the API writes its other times: ISO 8601 in UTC, with Z."""
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


def _json(value):
    return json_value(value) if isinstance(value, float) and not math.isfinite(value) else value


def _csv(table: Table) -> HttpResponse:
    out = io.StringIO()
    writer = csv.writer(out)
    ids = ["run_id"] + [column["id"] for column in table.columns]
    writer.writerow(ids)
    for row in table.rows:
        cells = [row["run_id"]]
        for column in ids[1:]:
            value = value_of(row, column)
            if column in ("created_at", "finished_at") and value is not MISSING:
                value = _iso(value)
            elif isinstance(value, float) and not math.isfinite(value):
                value = json_value(value)
            cells.append(_csv_cell(value))
        writer.writerow(cells)
    response = HttpResponse(out.getvalue(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="sweep-{table.sweep.id}.csv"'
    return response


def _csv_cell(value):
    if value is MISSING or value is None:
        return ""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value  # a spreadsheet would run it as a formula
    return value
