"""REST for a sweep's early stopping: its rungs, who reached each and what was decided there
(scheduler_app.sweeps.rungs), and the GPU-hours its stops saved."""

from __future__ import annotations

from typing import Any

from ninja import Field, Router, Schema, Status

from scheduler_app.api.sweeps import ErrorOut
from scheduler_app.metrics.queries import json_value
from scheduler_app.models import Sweep
from scheduler_app.sweeps.rungs import rung_report

router = Router(tags=["sweeps"])


class RungRunOut(Schema):
    run_id: str
    value: Any = Field(description='Its metric at the rung ("NaN", "Infinity" as JSON lacks)')
    step: int = Field(description="The step of that value (at or past the rung)")
    kept: bool = Field(description="It went on; false: it was stopped here")
    cutoff: float | None = Field(description="The cut-off it was judged by; null: the first")
    words: str


class RungOut(Schema):
    step: int
    reached: int = Field(description="Runs judged at this rung")
    kept: int
    stopped: int
    cutoff_now: float | None = Field(description="What a run reaching it now must match")
    runs: list[RungRunOut] = Field(description="In the order they were judged")


class RungsOut(Schema):
    early_stop: dict[str, Any]
    rungs: list[RungOut]
    stopped_runs: int
    run_hours_saved: float = Field(
        description="Estimated: each stopped run's time so far * (max_steps / its step - 1)"
    )
    gpu_hours_saved: float = Field(description="The same, times each run's GPUs")


@router.get(
    "/sweeps/{sweep_id}/rungs",
    response={200: RungsOut, 404: ErrorOut},
    summary="A sweep's early-stopping rungs: who reached which, the cut-offs, GPU-hours saved",
)
def sweep_rungs(request, sweep_id: str):
    sweep = Sweep.objects.filter(pk=sweep_id[:40]).first()
    if sweep is None:
        return Status(404, {"detail": f"no sweep {sweep_id[:40]!r}"})
    report = rung_report(sweep)
    if report is None:
        return Status(404, {"detail": f"sweep {sweep.pk} has no early stopping"})
    for rung in report["rungs"]:
        for run in rung["runs"]:
            run["value"] = json_value(run["value"])
    return report
