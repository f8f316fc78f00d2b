"""A sweep's early stopping as the database keeps it: a run judged at a rung (`judge`), and
the rungs as the sweep page and the API show them (`rung_report`).

The judgement is agentsys.asha's; what makes it asynchronous successive halving and not a race
is here: the sweep's row is locked while a run is judged, so two runs reaching a rung at once
on two hosts are judged one after the other, the second against the first. A run is judged
once per rung: asked again (its executor re-adopted by a restarted runagentd), the answer
recorded the first time is given.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from django.db import transaction

from agentsys import asha
from scheduler_app.models import Run, RunStatus, Sweep, SweepRung


@dataclass(frozen=True)
class Judged:
    keep: bool
    words: str


def judge(*, run_id: str, rung: int, value: float, step: int, ended: bool = False) -> Judged | None:
    """Does run `run_id`, whose metric is `value` at `step` (at or past `rung`), go on? None
    when it has no sweep with early stopping (nothing to judge). `ended`: it has ended, and
    its value is recorded for the runs after it (agentsys.asha.decide)."""
    with transaction.atomic():
        sweep_id = Run.objects.filter(pk=run_id).values_list("sweep_id", flat=True).first()
        if sweep_id is None:
            return None
        sweep = Sweep.objects.select_for_update().filter(pk=sweep_id).first()
        spec = _spec_of(sweep)
        if spec is None:
            return None
        earlier = SweepRung.objects.filter(run_id=run_id, rung=rung).first()
        if earlier is not None:
            return Judged(earlier.kept, earlier.words)
        recorded = list(
            SweepRung.objects.filter(sweep_id=sweep_id, rung=rung).values_list("value", flat=True)
        )
        decision = asha.decide(spec, recorded, value, rung, ended=ended)
        SweepRung.objects.create(
            sweep_id=sweep_id,
            run_id=run_id,
            rung=rung,
            step=step,
            value=value,
            kept=decision.keep,
            cutoff=decision.cutoff,
            words=decision.words[:2000],
        )
    return Judged(decision.keep, decision.words)


def _spec_of(sweep: Sweep | None) -> dict | None:
    if sweep is None:
        return None
    try:
        return asha.parse(sweep.early_stop)
    except ValueError:  # checked when it was made: only a hand-edited row gets here
        return None


def rung_report(sweep: Sweep) -> dict | None:
    """The sweep's rungs: for each, the runs that reached it (value, kept or stopped, the
    cut-off each met), and the GPU-hours its stops saved. None when it has no early stop."""
    spec = _spec_of(sweep)
    if spec is None:
        return None
    judged = list(
        SweepRung.objects.filter(sweep=sweep)
        .order_by("rung", "at", "id")
        .values("run_id", "rung", "step", "value", "kept", "cutoff", "words")
    )
    rows = {rung: [] for rung in asha.rungs_of(spec)}
    for row in judged:
        rows.setdefault(row["rung"], []).append(row)
    rungs = [_rung(spec, rung, reached) for rung, reached in sorted(rows.items())]
    stopped = {row["run_id"]: row for row in judged if not row["kept"]}
    saved = _saved(spec, stopped)
    return {"early_stop": spec, "rungs": rungs, **saved}


def _rung(spec: dict, rung: int, reached: list[dict]) -> dict:
    finite = [row["value"] for row in reached if math.isfinite(row["value"])]
    q = 1 / spec["reduction"] if spec["mode"] == "min" else 1 - 1 / spec["reduction"]
    return {
        "step": rung,
        "reached": len(reached),
        "kept": sum(1 for row in reached if row["kept"]),
        "stopped": sum(1 for row in reached if not row["kept"]),
        # What a run reaching it now would have to match: the same quantile over all there.
        "cutoff_now": asha.quantile(finite, q) if finite else None,
        "runs": [
            {
                "run_id": row["run_id"],
                "value": row["value"],
                "step": row["step"],
                "kept": row["kept"],
                "cutoff": row["cutoff"],
                "words": row["words"],
            }
            for row in reached
        ],
    }


def _saved(spec: dict, stopped: dict[str, dict]) -> dict:
    """What the stops saved: each stopped run's time so far, scaled to the steps it did not
    train (max_steps / its step - 1), times its GPUs. An estimate, said to be one."""
    runs = Run.objects.filter(pk__in=list(stopped), status=RunStatus.STOPPED).values(
        "pk", "started_at", "finished_at", "gpu_required"
    )
    seconds = gpu_seconds = 0.0
    for run in runs:
        if not (run["started_at"] and run["finished_at"]):
            continue
        ran = (run["finished_at"] - run["started_at"]).total_seconds()
        step = max(stopped[run["pk"]]["step"], 1)
        left = ran * max(spec["max_steps"] / step - 1, 0.0)
        seconds += left
        gpu_seconds += left * run["gpu_required"]
    return {
        "stopped_runs": len(stopped),
        "run_hours_saved": round(seconds / 3600, 4),
        "gpu_hours_saved": round(gpu_seconds / 3600, 4),
    }
