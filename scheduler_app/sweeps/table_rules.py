"""The sweep table's rules: how any column sorts and how a filter holds, checked here and
applied in PostgreSQL (scheduler_app.sweeps.table_sql).

One sort rule for every column, so that a param whose values mix numbers and strings still
reads sensibly: numbers (ascending), then strings (case-insensitive; a boolean is its word),
then NaN, then missing (null, an object or a list is no value). Descending reverses the
numbers and the strings; NaN and missing stay last either way, so the best runs come first
whichever way a metric is better. Ties: the newest run first, then by id.

A filter: eq and ne compare a number as a number (`0.10` is 0.1, NaN equals nothing) and a
string, folded, as a string; a run without a value is `ne` anything. contains looks in any
value's text; lt, le, gt, ge and between hold numbers only (never NaN).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scheduler_app.models import RunStatus

NUMBER_OPS = frozenset({"lt", "le", "gt", "ge", "between"})
OPS = NUMBER_OPS | {"eq", "ne", "contains"}
MISSING = object()


class BadTableQuery(ValueError):
    """A sort, filter or status the table cannot apply; the message says which and why."""


@dataclass(frozen=True)
class Where:
    column: str
    op: str
    value: str
    numbers: tuple[float, ...] = ()


def value_of(row: dict, column: str) -> Any:
    """The cell of `column` in `row` (as scheduler_app.sweeps.table builds rows); MISSING
    where the run has none."""
    kind, _, rest = column.partition(".")
    if kind == "param":
        return row["params"].get(rest, MISSING)
    if kind == "metric":
        key, _, stat = rest.rpartition(".")
        value = row["metrics"].get(key, {}).get(stat)
        return MISSING if value is None else value
    value = row.get(column)
    return MISSING if value is None else value


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


def checked_statuses(statuses: list[str]) -> set[str]:
    valid = set(RunStatus.values)
    wanted = {s.strip() for text in statuses for s in text.split(",") if s.strip()}
    unknown = wanted - valid
    if unknown:
        raise BadTableQuery(
            f"status: {', '.join(sorted(unknown))[:100]} is not a run status "
            f"({', '.join(sorted(valid))})"
        )
    return wanted
