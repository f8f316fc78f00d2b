"""Early stopping across a sweep: asynchronous successive halving (ASHA), as Ray Tune's
ASHAScheduler does it.

A sweep's `early_stop` is {"type": "asha", "metric", "mode" ("min"/"max"), "grace_steps",
"reduction" (η), "max_steps"}. Its rungs are at grace_steps·η^k steps, below max_steps (with
1, 3 and 81: steps 1, 3, 9 and 27). When a run's metric is first stored at a step at or past a
rung, it is judged there against the runs that reached that rung before it: it goes on only
if it is in the top 1/η of them (the cut-off is the 1/η quantile of their values for "min",
the 1 - 1/η one for "max", interpolated as numpy's percentile does), else it ends `stopped`.
The first run at a rung has nobody to lose to and goes on. A run that jumps past several
rungs in one row is judged at the highest (as Ray does). A NaN or ±inf value is stopped and
counts in nobody's cut-off.

Asynchronous, so the order matters: a run is never judged again at a rung (the sweep's
record of who reached which rung is the truth, kept by the database under the sweep's lock;
scheduler_app.sweeps.rungs). This module is the arithmetic and the per-run bookkeeping, with
no database in it: `parse`, `rungs_of`, `decide`, and `RungWatch`, which the executor's
watchdog feeds the run's rows and which says when a rung is reached.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from agentsys.metrics import STEP_KEYS, stored_step
from agentsys.stop_rules import seen, whole_number

KEYS = ("type", "metric", "mode", "grace_steps", "reduction", "max_steps")
DEFAULTS = {"mode": "min", "grace_steps": 1, "reduction": 3}
MAX_RUNGS = 40


@dataclass(frozen=True)
class Decision:
    keep: bool
    cutoff: float | None  # None: the first at its rung, or a value that is not a number
    words: str  # why, as the run's stopped_by says it when it is stopped


@dataclass(frozen=True)
class Reached:
    """A run's metric stored at `step`, at or past `rung`, for the first time."""

    rung: int
    value: float
    step: int


def parse(spec: Any, *, field: str = "early_stop") -> dict[str, Any] | None:
    """`spec` checked, its defaults filled in; None for none. ValueError naming the key at
    fault (the API's 422 says it)."""
    if spec is None or spec == {}:
        return None
    if not isinstance(spec, dict):
        raise ValueError(f'{field} must be an object, e.g. {{"type": "asha", "metric": "loss"}}')
    unknown = sorted(set(spec) - set(KEYS), key=str)
    if unknown:
        raise ValueError(f"{field}: unknown key {unknown[0]!r} (it takes {', '.join(KEYS)})")
    if spec.get("type") != "asha":
        raise ValueError(f'{field}.type must be "asha", got {spec.get("type")!r}')
    parsed = {**DEFAULTS, **spec}
    metric = parsed.get("metric")
    if not isinstance(metric, str) or not metric.strip() or len(metric) > 200:
        raise ValueError(f'{field}.metric must name a metric, e.g. "loss"')
    if metric.startswith("_") or metric in STEP_KEYS:
        raise ValueError(f"{field}.metric: {metric!r} is a step or time, not a metric")
    if parsed["mode"] not in ("min", "max"):
        raise ValueError(f'{field}.mode must be "min" or "max", got {parsed["mode"]!r}')
    reduction = parsed["reduction"]
    if isinstance(reduction, bool) or not isinstance(reduction, int | float):
        raise ValueError(f"{field}.reduction must be a number, got {reduction!r}")
    if not (math.isfinite(reduction) and reduction > 1):
        raise ValueError(f"{field}.reduction (η) must be more than 1, got {reduction!r}")
    grace = _whole(parsed, "grace_steps", field, least=1)
    if "max_steps" not in spec:
        raise ValueError(f"{field}.max_steps is needed: the steps a run trains to in full")
    most = _whole(parsed, "max_steps", field, least=1)
    if most <= grace:
        raise ValueError(f"{field}.max_steps ({most}) must be more than grace_steps ({grace})")
    parsed.update(grace_steps=grace, max_steps=most)
    return parsed


def _whole(spec: dict, key: str, field: str, *, least: int) -> int:
    return whole_number(spec[key], f"{field}.{key}", least=least)


def rungs_of(spec: dict[str, Any]) -> list[int]:
    """The steps at which runs are judged: grace_steps·η^k below max_steps, ascending."""
    found: list[int] = []
    k = 0
    while len(found) < MAX_RUNGS:
        rung = round(spec["grace_steps"] * spec["reduction"] ** k)
        if rung >= spec["max_steps"]:
            break
        if not found or rung > found[-1]:
            found.append(rung)
        k += 1
    return found


def quantile(values: list[float], q: float) -> float:
    """numpy.quantile(values, q) with its default (linear) interpolation, to the last bit:
    runs whose losses differ only there (equal in exact arithmetic) are kept or stopped as
    numpy would say."""
    ordered = sorted(values)
    at = q * (len(ordered) - 1)
    low = math.floor(at)
    high = min(low + 1, len(ordered) - 1)
    a, b, t = ordered[low], ordered[high], at - low
    # numpy's lerp: from the nearer end, so that a weight of 1 gives b exactly
    return b - (b - a) * (1 - t) if t >= 0.5 else a + (b - a) * t


def decide(
    spec: dict[str, Any], recorded: list[float], value: float, rung: int, *, ended: bool = False
) -> Decision:
    """Does a run whose metric is `value` at `rung` go on, given the values of the runs that
    reached the rung before it (`recorded`)? `ended`: the run ended before it was judged
    there (a short run read once at its end): its value counts for later runs, and it is
    kept, since nothing of it is left to stop."""
    metric, eta = spec["metric"], spec["reduction"]
    if ended:
        return Decision(True, None, f"ASHA rung {rung}: {metric} {seen(value)}, read at its end")
    if not math.isfinite(value):
        return Decision(False, None, f"ASHA rung {rung}: {metric} is {seen(value)}")
    earlier = [v for v in recorded if v is not None and math.isfinite(v)]
    if not earlier:
        return Decision(True, None, f"ASHA rung {rung}: the first run there goes on")
    top = f"1/{_show(eta)}"
    if spec["mode"] == "min":
        cutoff = quantile(earlier, 1 / eta)
        keep, worse = value <= cutoff, ">"
    else:
        cutoff = quantile(earlier, 1 - 1 / eta)
        keep, worse = value >= cutoff, "<"
    said = "in" if keep else "not in"
    compared = "within" if keep else worse
    words = (
        f"ASHA rung {rung}: {metric} {seen(value)} {said} the top {top} of the "
        f"{len(earlier) + 1} runs there ({compared} cut-off {seen(cutoff)})"
    )
    return Decision(keep, cutoff, words)


class RungWatch:
    """One run's progress through its sweep's rungs, fed its rows as they are read. Rows
    without a step get the metric's next one, as the series store numbers them."""

    def __init__(self, spec: dict[str, Any]):
        self.spec = spec
        self.metric = spec["metric"]
        self.rungs = rungs_of(spec)
        self.passed = -1  # the index of the highest rung reached so far
        self._next_step = 0

    def feed(self, row: dict[str, Any]) -> Reached | None:
        if self.metric not in row:
            return None
        raw = row[self.metric]
        if isinstance(raw, bool) or not isinstance(raw, int | float):
            return None
        step = stored_step(row)
        step = self._next_step if step is None else step
        self._next_step = max(self._next_step, step + 1)
        highest = self.passed
        while highest + 1 < len(self.rungs) and self.rungs[highest + 1] <= step:
            highest += 1
        if highest == self.passed:
            return None
        self.passed = highest
        return Reached(self.rungs[highest], _float(raw), step)

    def feed_all(self, rows: list[dict[str, Any]]) -> list[Reached]:
        return [reached for row in rows if (reached := self.feed(row)) is not None]

    def forget(self, reached: Reached) -> None:
        """`reached` could not be judged: the next row at or past its rung is."""
        self.passed = min(self.passed, self.rungs.index(reached.rung) - 1)


def _float(raw: int | float) -> float:
    try:
        return float(raw)
    except OverflowError:
        return math.copysign(math.inf, raw)


def _show(number: float) -> str:
    return str(int(number)) if float(number).is_integer() else repr(number)
