"""The sweep table: every run of a sweep side by side, its params against its metrics.

Columns: the run's own (name, status, created_at, duration_s, exit_code), one per param name
any run of the sweep has (`param.<name>`: the run's `params`, then what its trackers logged
that it does not set itself), and three per metric key (`metric.<key>.last|min|max`, from its
series, whatever source wrote them).

One sort rule for every column, so that a param whose values mix numbers and strings still
reads sensibly: numbers (ascending), then strings (case-insensitive), then NaN, then missing.
Descending reverses the numbers and the strings; NaN and missing stay last either way, so the
best runs come first whichever way a metric is better.

Built in Python from two queries (the sweep's runs, their series): sorting and filtering mix
JSON params and per-key series, and 10^4 runs are a few tens of thousands of rows
(`bench/ui.py` sweep_table_api_10000_runs_ms).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from django.db import connection

from scheduler_app.models import RunStatus, Sweep

RUN_COLUMNS = {
    "name": "string",
    "status": "string",
    "created_at": "date",  # epoch seconds in rows; the API writes ISO 8601
    "duration_s": "number",
    "exit_code": "number",
}
STATS = ("last", "min", "max")
NUMBER_OPS = frozenset({"lt", "le", "gt", "ge", "between"})
OPS = NUMBER_OPS | {"eq", "ne", "contains"}
MAX_WHERE = 20
MISSING = object()


class BadTableQuery(ValueError):
    """A sort, filter or status the table cannot apply; the message says which and why."""


@dataclass(frozen=True)
class Where:
    column: str
    op: str
    value: str
    numbers: tuple[float, ...] = ()


@dataclass
class Table:
    sweep: Sweep
    columns: list[dict]
    rows: list[dict]  # filtered and sorted
    run_count: int


@dataclass
class _Frame:
    """The sweep's runs, each a row dict, and the param names and metric keys they have."""

    rows: list[dict] = field(default_factory=list)
    params: set[str] = field(default_factory=set)
    metrics: set[str] = field(default_factory=set)


def sweep_table(
    sweep: Sweep,
    *,
    sort: str = "-created_at",
    statuses: list[str] | None = None,
    where: list[str] | None = None,
) -> Table:
    frame = _frame(sweep)
    columns = _columns(frame)
    known = {column["id"] for column in columns}
    clauses = [parse_where(text, known) for text in (where or [])[: MAX_WHERE + 1]]
    if len(clauses) > MAX_WHERE:
        raise BadTableQuery(f"at most {MAX_WHERE} where clauses")
    wanted = _statuses(statuses or [])
    rows = [
        row
        for row in frame.rows
        if (not wanted or row["status"] in wanted) and all(_holds(row, c) for c in clauses)
    ]
    return Table(sweep, columns, sort_rows(rows, sort, known), len(frame.rows))


# Times as epoch seconds and params merged in PostgreSQL: converting 10^4 datetimes and two
# JSON documents per row in Python was a third of the table's time.
RUNS_SQL = """
SELECT id, name, status, exit_code, agent_id,
       EXTRACT(EPOCH FROM created_at)::float8,
       EXTRACT(EPOCH FROM finished_at)::float8,
       EXTRACT(EPOCH FROM finished_at - started_at)::float8,
       logged_params || params
FROM scheduler_app_run WHERE sweep_id = %s
"""
SERIES_SQL = """
SELECT s.run_id, s.key, s.last_value, s.min_value, s.max_value, s.last_step, s.points, s.source
FROM scheduler_app_metricseries s JOIN scheduler_app_run r ON r.id = s.run_id
WHERE r.sweep_id = %s
"""


def _frame(sweep: Sweep) -> _Frame:
    frame = _Frame()
    by_run: dict[str, dict] = {}
    with connection.cursor() as cursor:
        cursor.execute(RUNS_SQL, [sweep.pk])
        for run_id, name, status, code, agent_id, created, finished, duration, params in cursor:
            merged = _scalars(params)  # its own params over what its trackers logged
            frame.params.update(merged)
            row = {
                "run_id": run_id,
                "name": name,
                "status": status,
                "exit_code": code,
                "agent_id": agent_id,
                "created_at": created,
                "finished_at": finished,
                "duration_s": duration,
                "params": merged,
                "metrics": {},
            }
            by_run[run_id] = row
            frame.rows.append(row)
        cursor.execute(SERIES_SQL, [sweep.pk])
        for run_id, key, last, low, high, last_step, points, source in cursor:
            frame.metrics.add(key)
            by_run[run_id]["metrics"][key] = {
                "last": last,
                "min": low,
                "max": high,
                "last_step": last_step,
                "points": points,
                "source": source,
            }
    return frame


def _scalars(params) -> dict:
    if isinstance(params, str):  # jsonb arrives decoded; text where no loader is set
        params = json.loads(params)
    if not isinstance(params, dict):
        return {}
    return {k: v for k, v in params.items() if not isinstance(v, dict | list)}


def _columns(frame: _Frame) -> list[dict]:
    columns = [
        {"id": name, "kind": "run", "label": name.replace("_", " "), "type": kind}
        for name, kind in RUN_COLUMNS.items()
    ]
    for name in sorted(frame.params):
        values = [row["params"][name] for row in frame.rows if name in row["params"]]
        columns.append(
            {"id": f"param.{name}", "kind": "param", "label": name, "type": _type_of(values)}
        )
    for key in sorted(frame.metrics):
        columns += [
            {
                "id": f"metric.{key}.{stat}",
                "kind": "metric",
                "key": key,
                "stat": stat,
                "label": f"{key} ({stat})",
                "type": "number",
            }
            for stat in STATS
        ]
    return columns


def _type_of(values: list) -> str:
    numbers = sum(1 for v in values if _is_number(v))
    if numbers == len(values):
        return "number"
    return "string" if numbers == 0 else "mixed"


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def value_of(row: dict, column: str) -> Any:
    """The cell of `column` in `row`; MISSING where the run has none."""
    kind, _, rest = column.partition(".")
    if kind == "param":
        return row["params"].get(rest, MISSING)
    if kind == "metric":
        key, _, stat = rest.rpartition(".")
        value = row["metrics"].get(key, {}).get(stat)
        return MISSING if value is None else value
    value = row.get(column)
    return MISSING if value is None else value


# -- sorting ---------------------------------------------------------------------------------


def sort_rows(rows: list[dict], sort: str, known: set[str]) -> list[dict]:
    descending = sort.startswith("-")
    column = sort[1:] if descending else sort
    if column not in known:
        raise BadTableQuery(f"sort: no column {column!r} in this sweep")
    groups: list[list[tuple[Any, dict]]] = [[], [], [], []]  # numbers, strings, NaN, missing
    for row in rows:
        value = value_of(row, column)
        if value is MISSING:
            groups[3].append((0, row))
        elif _is_number(value):
            groups[2 if math.isnan(value) else 0].append((value, row))
        else:
            groups[1].append((str(value).casefold(), row))
    ordered = []
    for index, group in enumerate(groups):
        # Ties keep the newest run first, as the unsorted table does.
        group.sort(key=lambda pair: pair[1]["created_at"], reverse=True)
        if index < 2:
            group.sort(key=lambda pair: pair[0], reverse=descending)
        ordered += [row for _, row in group]
    return ordered


# -- filtering -------------------------------------------------------------------------------


def parse_where(text: str, known: set[str]) -> Where:
    """`<column>:<op>:<value>`, e.g. `param.lr:eq:0.1`, `metric.loss.last:between:0,0.5`."""
    column, _, rest = text.partition(":")
    op, _, value = rest.partition(":")
    if not column or not op:
        raise BadTableQuery(f"where {text[:100]!r}: write <column>:<op>:<value>")
    if column not in known:
        raise BadTableQuery(f"where: no column {column[:100]!r} in this sweep")
    if op not in OPS:
        raise BadTableQuery(
            f"where {column}: op {op[:20]!r} is not one of {', '.join(sorted(OPS))}"
        )
    numbers: tuple[float, ...] = ()
    if op in NUMBER_OPS:
        parts = value.split(",") if op == "between" else [value]
        try:
            numbers = tuple(float(part) for part in parts)
        except ValueError:
            raise BadTableQuery(f"where {column}:{op}: {value[:50]!r} is not a number") from None
        if op == "between" and len(numbers) != 2:
            raise BadTableQuery(f"where {column}:between: give two numbers, low,high")
    return Where(column, op, value, numbers)


def _holds(row: dict, where: Where) -> bool:
    value = value_of(row, where.column)
    if where.op in ("eq", "ne"):
        return _equals(value, where.value) == (where.op == "eq")
    if where.op == "contains":
        return value is not MISSING and where.value.casefold() in str(value).casefold()
    if not _is_number(value) or math.isnan(value):
        return False  # a range holds numbers only
    if where.op == "between":
        low, high = where.numbers
        return low <= value <= high
    limit = where.numbers[0]
    return {
        "lt": value < limit,
        "le": value <= limit,
        "gt": value > limit,
        "ge": value >= limit,
    }[where.op]


def _equals(value, text: str) -> bool:
    if value is MISSING:
        return False
    if _is_number(value):
        try:
            return value == float(text)
        except ValueError:
            return False
    return str(value).casefold() == text.casefold()


def _statuses(statuses: list[str]) -> set[str]:
    valid = set(RunStatus.values)
    wanted = {s.strip() for text in statuses for s in text.split(",") if s.strip()}
    unknown = wanted - valid
    if unknown:
        raise BadTableQuery(
            f"status: {', '.join(sorted(unknown))[:100]} is not a run status "
            f"({', '.join(sorted(valid))})"
        )
    return wanted
