"""What `wait_runs` waits for (issue 39 §3): its conditions over runs, parsed from the JSON a
caller sends, and judged against a snapshot of the runs, in words and as data.

`until` is one condition or a list of them (the first that holds wakes the wait):

- `"any_ended"`: one of the runs ended (done, failed, stopped, cancelled, rejected, lost);
- `"all_ended"`: every one of them ended;
- `"failed"`: one of them failed or was lost (ended with an error or no exit code);
- `"alert"`: an alert was raised on one of them after the wait began (alerts older than
  the wait do not count: they were there to be read before it);
- `{"metric": "loss", "below": 0.1}` / `{"metric": "loss", "above": 3}`: the last stored
  value of that metric of one of them is below (above) the value. The last value, not the
  best since the wait began: it is where the run is now, as `get_run` shows it, and a
  diverging loss that came back down is not reported as diverged. A value inside a batch of
  rows but not last in it goes unseen; NaN is neither below nor above anything.

A condition that holds already when the wait starts wakes it at once. Plain Python: the
snapshot is read by the caller (scheduler_app.run_wait_reads) and handed in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from agentsys.types import END_STATES, EndState

# A run's end states (a chat turn's `interrupted` is none of a run's).
ENDED = frozenset(END_STATES - {EndState.INTERRUPTED})
FAILED = frozenset({EndState.FAILED, EndState.LOST})
WORDS = ("any_ended", "all_ended", "failed", "alert")
MAX_CONDITIONS = 10
MAX_METRIC_NAME = 200  # a series key's own limit (scheduler_app.metrics.series)


class BadCondition(ValueError):
    """`until` is not a condition this module knows; the message says what is wrong."""


@dataclass(frozen=True)
class Condition:
    """One parsed condition: a word of WORDS, or "metric" with its name, side and bound."""

    kind: str
    metric: str = ""
    side: str = ""  # "below" or "above"
    bound: float = 0.0

    def as_data(self) -> str | dict:
        if self.kind != "metric":
            return self.kind
        return {"metric": self.metric, self.side: self.bound}

    def words(self) -> str:
        return self.kind if self.kind != "metric" else f"{self.metric} {self.side} {self.bound:g}"


@dataclass
class RunState:
    """A run as a condition sees it: its status, the last value and step of each metric, and
    its newest alert (when it was raised, seconds since the epoch; severity; message)."""

    id: str
    name: str = ""
    status: str = ""
    exit_code: int | None = None
    error: str = ""
    metrics: dict[str, tuple[float, int | None]] = field(default_factory=dict)
    last_alert: tuple[float, str, str] | None = None

    def summary(self) -> dict:
        return {
            "id": self.id,
            "name": self.name,
            "status": self.status,
            "exit_code": self.exit_code,
            "metrics": {
                key: {"last": _json_number(value), "step": step}
                for key, (value, step) in self.metrics.items()
            },
        }


@dataclass(frozen=True)
class Held:
    """A condition that held: which, for which run (None: for all of them), in words."""

    condition: Condition
    run_id: str | None
    reason: str

    def as_data(self) -> dict:
        return {
            "woke": True,
            "reason": self.reason,
            "condition": self.condition.as_data(),
            "run_id": self.run_id,
        }


def parse_until(until: Any) -> list[Condition]:
    """`until` as conditions; a BadCondition naming what is wrong otherwise."""
    items = until if isinstance(until, list) else [until]
    if not items:
        raise BadCondition("until is an empty list: give at least one condition")
    if len(items) > MAX_CONDITIONS:
        raise BadCondition(f"until has {len(items)} conditions; at most {MAX_CONDITIONS}")
    return [_one(item) for item in items]


def _one(item: Any) -> Condition:
    if isinstance(item, str):
        if item not in WORDS:
            raise BadCondition(
                f"until: {item[:50]!r} is not a condition; the words are {', '.join(WORDS)}, "
                'or a metric: {"metric": "loss", "below": 0.1}'
            )
        return Condition(item)
    if not isinstance(item, dict):
        raise BadCondition(
            f"until: a condition is a word ({', '.join(WORDS)}) or an object like "
            f'{{"metric": "loss", "below": 0.1}}, not {type(item).__name__}'
        )
    unknown = sorted(set(item) - {"metric", "below", "above"})
    if unknown:
        raise BadCondition(
            f"until: {', '.join(map(str, unknown))} is not a key of a metric "
            "condition (metric, and below or above)"
        )
    name = item.get("metric")
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_METRIC_NAME:
        raise BadCondition(
            f"until: metric must be a metric's name (1 to {MAX_METRIC_NAME} characters)"
        )
    sides = [side for side in ("below", "above") if side in item]
    if len(sides) != 1:
        raise BadCondition(f"until: the condition on {name} needs one of below or above")
    bound = item[sides[0]]
    if isinstance(bound, bool) or not isinstance(bound, int | float) or not math.isfinite(bound):
        raise BadCondition(f"until: {sides[0]} of {name} must be a finite number")
    return Condition("metric", metric=name, side=sides[0], bound=float(bound))


def first_held(conditions: list[Condition], runs: list[RunState], since: float) -> Held | None:
    """The first of `conditions` that holds over `runs` (in their order), or None. `since`:
    when the wait began (seconds since the epoch), for "alert"."""
    for condition in conditions:
        held = _judge(condition, runs, since)
        if held is not None:
            return held
    return None


def _judge(condition: Condition, runs: list[RunState], since: float) -> Held | None:
    kind = condition.kind
    if kind == "all_ended":
        if runs and all(run.status in ENDED for run in runs):
            return Held(condition, None, f"all {len(runs)} runs ended: {_tally(runs)}")
        return None
    for run in runs:
        said = _said(condition, run, since)
        if said:
            return Held(condition, run.id, f"run {run.id}{_named(run)} {said}")
    return None


def _said(condition: Condition, run: RunState, since: float) -> str:
    """What `run` did that meets `condition` (any_ended, failed, alert, metric), or ""."""
    kind = condition.kind
    if kind == "any_ended" and run.status in ENDED:
        return f"ended: {_end(run)}"
    if kind == "failed" and run.status in FAILED:
        return f"failed: {_end(run)}"
    if kind == "alert" and run.last_alert and run.last_alert[0] >= since:
        _at, severity, message = run.last_alert
        return f"raised an alert ({severity}): {message.splitlines()[0][:200] if message else ''}"
    if kind == "metric" and condition.metric in run.metrics:
        value, step = run.metrics[condition.metric]
        crossed = value < condition.bound if condition.side == "below" else value > condition.bound
        if crossed:
            at = f" at step {step}" if step is not None else ""
            return f"reached {condition.metric} {value:g}{at} ({condition.words()})"
    return ""


def timed_out(conditions: list[Condition], timeout_s: float) -> str:
    said = "; ".join(condition.words() for condition in conditions)
    return f"timed out after {timeout_s:g} s; none of {said} held"


def _named(run: RunState) -> str:
    return f" ({run.name})" if run.name else ""


def _end(run: RunState) -> str:
    code = f", exit code {run.exit_code}" if run.exit_code is not None else ""
    error = run.error.strip().splitlines()[0][:200] if run.error.strip() else ""
    return f"{run.status}{code}" + (f": {error}" if error else "")


def _tally(runs: list[RunState]) -> str:
    counts: dict[str, int] = {}
    for run in runs:
        counts[run.status] = counts.get(run.status, 0) + 1
    return ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))


def _json_number(value: float) -> float | str:
    """JSON has no NaN or infinity: those are said as strings."""
    return value if math.isfinite(value) else str(value)
