"""Stop rules: when a run should end early, said by whoever made it (`stop_when`).

A run, a batch or a sweep takes a list of rules, each one of:

    {"metric": "loss", "above": 2.0, "after_step": 100}    a value over a bound
    {"metric": "loss", "below": 0.01}                        a value under a bound
    {"metric": "loss", "nan": true}                          NaN or ±inf
    {"metric": "val_loss", "no_improvement_steps": 500,     no new best for that many steps
     "mode": "min", "min_delta": 0.001}
    {"wall_seconds": 3600}                                   running that long

`after_step` (any metric rule) leaves the rule off until the step is past it. `parse` checks
a list and raises ValueError naming the rule at fault (the API's 422 says it); `StopRules` is
fed the run's metric rows as its executor reads them, O(1) a row, and says the first rule
met as a `Hit`, whose `words` go onto the run as `stopped_by`, e.g.
"loss > 2.0 after step 100: 3.71 at step 140".

Plain Python: the executor evaluates it on the host that runs the run, whatever the backend.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from agentsys.metrics import STEP_KEYS, STEP_LIMIT, stored_step

MAX_RULES = 50
MAX_METRIC_LENGTH = 200

KINDS = {
    "above": ("metric", "above", "after_step"),
    "below": ("metric", "below", "after_step"),
    "nan": ("metric", "nan", "after_step"),
    "no_improvement_steps": ("metric", "no_improvement_steps", "mode", "min_delta", "after_step"),
    "wall_seconds": ("wall_seconds",),
}
ALL_KEYS = sorted({key for keys in KINDS.values() for key in keys})


@dataclass(frozen=True)
class Hit:
    rule: dict[str, Any]
    words: str  # what the run's `stopped_by` says


def describe(rule: dict[str, Any]) -> str:
    """A rule as JSON, for an error that names it."""
    text = json.dumps(rule, sort_keys=False, default=str)
    return text if len(text) <= 200 else text[:197] + "..."


def parse(rules: Any, *, field: str = "stop_when") -> list[dict[str, Any]]:
    """`rules` checked, each rule with its defaults filled in (mode, min_delta); raises
    ValueError naming the first rule at fault and why."""
    if rules is None:
        return []
    if not isinstance(rules, list):
        raise ValueError(f"{field} must be a list of rules, got {type(rules).__name__}")
    if len(rules) > MAX_RULES:
        raise ValueError(f"{field}: at most {MAX_RULES} rules, got {len(rules)}")
    parsed = []
    for index, rule in enumerate(rules):
        try:
            parsed.append(_parse_rule(rule))
        except ValueError as error:
            named = describe(rule) if isinstance(rule, dict) else repr(rule)[:200]
            raise ValueError(f"{field}[{index}] {named}: {error}") from None
    return parsed


def _parse_rule(rule: Any) -> dict[str, Any]:
    if not isinstance(rule, dict):
        raise ValueError('a rule is an object, e.g. {"metric": "loss", "above": 2.0}')
    kinds = [kind for kind in KINDS if kind in rule]
    if len(kinds) != 1:
        said = "has " + " and ".join(kinds) if kinds else "has none"
        unknown = sorted(set(rule) - set(ALL_KEYS), key=str)
        if unknown:  # a typo, most likely: say it
            said += f" (unknown key {unknown[0]!r})"
        raise ValueError(f"a rule takes exactly one of {', '.join(KINDS)}; it {said}")
    kind = kinds[0]
    unknown = sorted(set(rule) - set(KINDS[kind]))
    if unknown:
        raise ValueError(
            f"unknown key {unknown[0]!r} for a {kind} rule (it takes {', '.join(KINDS[kind])})"
        )
    if kind == "wall_seconds":
        return {"wall_seconds": _number(rule, "wall_seconds", positive=True)}
    parsed: dict[str, Any] = {"metric": _metric(rule)}
    if kind in ("above", "below"):
        parsed[kind] = _number(rule, kind)
    elif kind == "nan":
        if rule["nan"] is not True:
            raise ValueError("nan must be true (leave the rule out to not stop on NaN)")
        parsed["nan"] = True
    else:
        parsed["no_improvement_steps"] = _integer(rule, "no_improvement_steps", least=1)
        mode = rule.get("mode", "min")
        if mode not in ("min", "max"):
            raise ValueError(f'mode must be "min" or "max", got {mode!r}')
        parsed["mode"] = mode
        parsed["min_delta"] = _number(rule, "min_delta") if "min_delta" in rule else 0.0
        if parsed["min_delta"] < 0:
            raise ValueError("min_delta must be 0 or more")
    if "after_step" in rule:
        parsed["after_step"] = _integer(rule, "after_step", least=0)
    return parsed


def _metric(rule: dict) -> str:
    name = rule.get("metric")
    if not isinstance(name, str) or not name.strip():
        raise ValueError('metric must name a metric, e.g. "loss"')
    if len(name) > MAX_METRIC_LENGTH:
        raise ValueError(f"metric names at most {MAX_METRIC_LENGTH} characters")
    if name.startswith("_") or name in STEP_KEYS:
        raise ValueError(f"{name!r} is a step or time, not a metric")
    return name


def _number(rule: dict, key: str, *, positive: bool = False) -> float | int:
    value = rule[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{key} must be a number, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{key} must be a finite number, got {value!r}")
    if positive and value <= 0:
        raise ValueError(f"{key} must be more than 0, got {value!r}")
    return value  # as given: 2.0 stays 2.0 in the words ("loss > 2.0")


def _integer(rule: dict, key: str, *, least: int) -> int:
    return whole_number(rule[key], key, least=least)


def whole_number(value: Any, name: str, *, least: int) -> int:
    """A count of steps as a rule gives it (9.0 is 9), from `least` to the step limit;
    ValueError naming `name` otherwise (agentsys.asha's keys are checked the same way)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be a whole number, got {value!r}")
    if not least <= value <= STEP_LIMIT:
        raise ValueError(f"{name} must be at least {least}, got {value!r}")
    return value


def time_limit(rules: Any) -> float | None:
    """A run's time limit in seconds: its smallest wall_seconds rule, which its executor
    enforces, so the queue may plan around it (agentsys.backfill); None without one. Reads
    stored rules leniently: what is not a usable rule is no limit."""
    limits = [
        rule["wall_seconds"]
        for rule in (rules if isinstance(rules, list) else [])
        if isinstance(rule, dict)
        and isinstance(rule.get("wall_seconds"), int | float)
        and not isinstance(rule["wall_seconds"], bool)
        and math.isfinite(rule["wall_seconds"])
        and rule["wall_seconds"] > 0
    ]
    return float(min(limits)) if limits else None


class StopRules:
    """The rules of one run, fed its rows as they are read (`feed`) and asked about time
    (`check_time`). Rows come from several sources, so steps may repeat or go back; a row
    without a step gets the metric's next one, as the series store does."""

    def __init__(self, rules: list[dict[str, Any]], *, started_at: float):
        self.rules = rules
        self.started_at = started_at
        self._by_metric: dict[str, list[_Watch]] = {}
        for rule in rules:
            if "metric" in rule:
                self._by_metric.setdefault(rule["metric"], []).append(_Watch(rule))
        self._walls = [rule for rule in rules if "wall_seconds" in rule]
        self._next_step: dict[str, int] = {}

    @property
    def timed(self) -> bool:
        """Whether a rule is on the clock (wall_seconds): met with no new row to show it."""
        return bool(self._walls)

    def __bool__(self) -> bool:
        return bool(self.rules)

    def feed(self, row: dict[str, Any]) -> Hit | None:
        """The first rule this row meets, or None."""
        if not self._by_metric:
            return None
        step = stored_step(row)
        for metric, watches in self._by_metric.items():
            if metric not in row:
                continue
            value = _value(row[metric])
            if value is None:
                continue
            at = self._next_step.get(metric, 0) if step is None else step
            self._next_step[metric] = max(self._next_step.get(metric, 0), at + 1)
            for watch in watches:
                words = watch.check(value, at)
                if words is not None:
                    return Hit(watch.rule, words)
        return None

    def feed_all(self, rows: list[dict[str, Any]]) -> Hit | None:
        for row in rows:
            hit = self.feed(row)
            if hit is not None:
                return hit
        return None

    def check_time(self, now: float) -> Hit | None:
        elapsed = now - self.started_at
        for rule in self._walls:
            if elapsed >= rule["wall_seconds"]:
                limit = _show(rule["wall_seconds"])
                return Hit(rule, f"wall time >= {limit} s: {elapsed:.0f} s")
        return None


class _Watch:
    """One metric rule and what it remembers (the best value so far, for no_improvement)."""

    def __init__(self, rule: dict[str, Any]):
        self.rule = rule
        self.after = rule.get("after_step")
        self.best: float | None = None
        self.best_step = 0

    def check(self, value: float, step: int) -> str | None:
        rule = self.rule
        if self.after is not None and step <= self.after:
            return None
        when = f" after step {self.after}" if self.after is not None else ""
        metric = rule["metric"]
        if "above" in rule:
            if value > rule["above"]:  # NaN compares false: the nan rule's to catch
                return f"{metric} > {_show(rule['above'])}{when}: {seen(value)} at step {step}"
            return None
        if "below" in rule:
            if value < rule["below"]:
                return f"{metric} < {_show(rule['below'])}{when}: {seen(value)} at step {step}"
            return None
        if "nan" in rule:
            if not math.isfinite(value):
                return f"{metric} is NaN or inf{when}: {seen(value)} at step {step}"
            return None
        return self._no_improvement(value, step, when)

    def _no_improvement(self, value: float, step: int, when: str) -> str | None:
        rule = self.rule
        sign = 1.0 if rule["mode"] == "min" else -1.0
        if math.isfinite(value) and (
            self.best is None or sign * (self.best - value) > rule["min_delta"]
        ):
            self.best, self.best_step = value, step
            return None
        if self.best is None:  # only NaN so far: nothing to improve on yet
            return None
        waited = step - self.best_step
        if waited < rule["no_improvement_steps"]:
            return None
        return (
            f"{rule['metric']} no better ({rule['mode']}, min_delta {_show(rule['min_delta'])}) "
            f"for {rule['no_improvement_steps']} steps{when}: best {seen(self.best)} at step "
            f"{self.best_step}, {seen(value)} at step {step}"
        )


def _value(raw: Any) -> float | None:
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        return None
    try:
        return float(raw)
    except OverflowError:
        return math.copysign(math.inf, raw)


def _show(bound: float | int) -> str:
    """A bound as the rule gave it: 2.0 → "2.0", 100 → "100"."""
    return repr(bound)


def seen(value: float) -> str:
    """A value read, as a stopped_by says it (agentsys.asha's too): short (3.7100000001 →
    "3.71"), NaN and inf as Python writes them."""
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.6g}"
