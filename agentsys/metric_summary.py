"""A run's metrics summary: the last, min, max and first value of each numeric series, with
its number of points and last step. It is what an agent and the research loop's next prompt
read of a run's metrics (the points themselves are the run's series, not memory).

Its own module because three readers share it and none owns it: the run agent summarises
agent_metrics.jsonl when its command ends, the metric watch summarises each source's rows as
it stores them (agentsys.metric_sources.watch, which also decides which source's summary of a
metric wins), and the research loop words a summary for the model (agentsys.research.results).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

# The series store's step keys: a row's step is never summarised as a metric of its own.
from agentsys.metrics import STEP_KEYS


def summarize_metrics(path: Path) -> dict[str, dict]:
    """agent_metrics.jsonl → {series: {last, min, max, first, points, last_step}} over its
    numeric values; lines that are not JSON objects are skipped."""
    summary: dict[str, dict] = {}
    try:
        with path.open(errors="replace") as lines:  # streamed: a metrics file may be large
            for line in lines:
                _add_row(summary, line)
    except OSError:
        return {}
    return summary


def _add_row(summary: dict[str, dict], line: str) -> None:
    try:
        row = json.loads(line)
    except (ValueError, RecursionError):  # RecursionError: a deeply nested line
        return
    if isinstance(row, dict):
        add_row(summary, row)


def add_row(summary: dict[str, dict], row: dict) -> None:
    """One metrics row into a summary of the shape summarize_metrics returns."""
    step = next((row[k] for k in STEP_KEYS if _is_number(row.get(k))), None)
    for name, value in row.items():
        # "_" fields (W&B's and every source's _timestamp, _runtime) are not metrics: the
        # series store charts none of them, and the model should not read them as results.
        if name in STEP_KEYS or name.startswith("_") or not _is_number(value):
            continue
        entry = summary.setdefault(
            name, {"first": value, "last": value, "min": None, "max": None, "points": 0}
        )
        entry["last"] = value
        if math.isfinite(value):  # a NaN loss is shown as the last value, not the best
            entry["min"] = value if entry["min"] is None else min(entry["min"], value)
            entry["max"] = value if entry["max"] is None else max(entry["max"], value)
        entry["points"] += 1
        entry["last_step"] = step


def _is_number(value) -> bool:
    """A plottable number: not a bool, and an int small enough to be a float."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return isinstance(value, float) or abs(value) < 2**1000
