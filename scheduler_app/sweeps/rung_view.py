"""The sweep page's early-stopping card as a person reads it: each rung a line of dots (the
runs judged there, by their value, kept or stopped) with its cut-off, and each run's furthest
rung. Positions are worked out here so the template only places them."""

from __future__ import annotations

import math
import statistics

from scheduler_app.models import Run
from scheduler_app.sweeps.rungs import rung_report

DOT_MARGIN = 3.0  # percent of the strip left clear at each end, so a dot is never cut
LOG_SPAN = 100.0  # the largest value over the smallest from which the strip is logarithmic
OFF_SCALE = 1000.0


def rungs_context(sweep) -> dict:
    report = rung_report(sweep)
    if report is None:
        return {"rungs": None}
    names = dict(Run.objects.filter(sweep=sweep).values_list("pk", "name"))
    values = [
        run["value"] for rung in report["rungs"] for run in rung["runs"] if _finite(run["value"])
    ]
    low, high = (min(values), max(values)) if values else (0.0, 1.0)
    # A diverged run's loss (1e67) would squeeze every other dot into one: over decades of
    # positive values the strip is logarithmic, and ends OFF_SCALE times the median value
    # (a value past it sits at the end, its number in its dot's title).
    log = low > 0 and high / low > LOG_SPAN
    if log:
        high = min(high, statistics.median(values) * OFF_SCALE)
    where = _log_at if log else _at
    worst_high = report["early_stop"]["mode"] == "min"  # where a NaN goes
    for rung in report["rungs"]:
        for run in rung["runs"]:
            run["name"] = names.get(run["run_id"], run["run_id"])
            run["x"] = where(run["value"], low, high, worst_high=worst_high)
        cutoff = rung["cutoff_now"]
        rung["cutoff_x"] = None if cutoff is None else where(cutoff, low, high, worst_high=True)
    furthest: dict[str, dict] = {}
    for rung in report["rungs"]:
        for run in rung["runs"]:
            furthest[run["run_id"]] = {**run, "rung": rung["step"]}
    return {
        "rungs": report,
        "rung_runs": sorted(furthest.values(), key=lambda run: (-run["rung"], not run["kept"])),
        "rung_scale": (low, high),
        "rung_scale_log": log,
        "rungs_live": getattr(sweep, "open_runs", 0) > 0,  # (selectors.sweeps counts them)
    }


def _finite(value) -> bool:
    return isinstance(value, float | int) and math.isfinite(value)


def _log_at(value: float, low: float, high: float, *, worst_high: bool) -> float:
    if not _finite(value) or value <= 0:
        return _at(value, low, high, worst_high=worst_high)
    return _at(math.log(value), math.log(low), math.log(high), worst_high=worst_high)


def _at(value: float, low: float, high: float, *, worst_high: bool) -> float:
    """Where `value` sits on the strip, in percent; a NaN or ±inf at the worse end."""
    if not _finite(value):
        return 100 - DOT_MARGIN if worst_high else DOT_MARGIN
    span = high - low
    share = 0.5 if span <= 0 else min(max((value - low) / span, 0.0), 1.0)
    return round(DOT_MARGIN + share * (100 - 2 * DOT_MARGIN), 2)
