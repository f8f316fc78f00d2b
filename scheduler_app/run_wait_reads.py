"""The reads of `wait_runs` (scheduler_app.run_waits): which runs a wait watches, and a
snapshot of them as its conditions see them (agentsys.run_waits.RunState): three indexed
queries for all the runs of all the waiters one piece of news wakes."""

from __future__ import annotations

from agentsys.run_waits import RunState
from scheduler_app.models import Alert, MetricSeries, Run, Sweep

MAX_RUNS = 1000  # a wait's runs; a sweep's runs, POST /api/runs/batch's limit


class NotFound(LookupError):
    """Runs or a sweep that do not exist (the message names them)."""


class TooMany(ValueError):
    """More runs than one wait watches (the message says how many)."""


def wait_targets(*, run_ids: list[str], sweep_id: str) -> list[str]:
    """The runs a wait watches: `run_ids` (each must exist), or the runs of sweep `sweep_id`
    when the wait starts (oldest first; runs made later are not watched)."""
    if sweep_id:
        if not Sweep.objects.filter(pk=sweep_id).exists():
            raise NotFound(f"no sweep {sweep_id}")
        found = list(
            Run.objects.filter(sweep_id=sweep_id)
            .order_by("created_at", "id")
            .values_list("pk", flat=True)[: MAX_RUNS + 1]
        )
        if not found:
            raise NotFound(f"sweep {sweep_id} has no runs to wait on")
    else:
        wanted = list(dict.fromkeys(run_ids))
        known = set(Run.objects.filter(pk__in=wanted).values_list("pk", flat=True))
        missing = [run_id for run_id in wanted if run_id not in known]
        if missing:
            shown = ", ".join(missing[:10]) + (
                f" and {len(missing) - 10} more" * (len(missing) > 10)
            )
            raise NotFound(f"no run {shown}")
        found = wanted
    if len(found) > MAX_RUNS:
        raise TooMany(f"at most {MAX_RUNS} runs a wait; {sweep_id or 'run_ids'} has more")
    return found


def run_states(run_ids: list[str]) -> dict[str, RunState]:
    """The runs of `run_ids` that exist: status, the last value and step of each metric, and
    the newest alert."""
    states = {
        pk: RunState(pk, name=name, status=status, exit_code=code, error=error)
        for pk, name, status, code, error in Run.objects.filter(pk__in=run_ids).values_list(
            "pk", "name", "status", "exit_code", "error"
        )
    }
    series = MetricSeries.objects.filter(run_id__in=list(states), last_value__isnull=False)
    for run_id, key, value, step in series.values_list("run_id", "key", "last_value", "last_step"):
        states[run_id].metrics[key] = (value, step)
    newest = (
        Alert.objects.filter(run_id__in=list(states))
        .order_by("run_id", "-created_at")
        .distinct("run_id")
        .values_list("run_id", "created_at", "severity", "message")
    )
    for run_id, at, severity, message in newest:
        states[run_id].last_alert = (at.timestamp(), severity, message)
    return states
