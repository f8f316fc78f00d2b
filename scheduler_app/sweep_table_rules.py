"""The sweep table's rules: how any column sorts and how a filter holds, on rows such as
scheduler_app.sweep_table builds.

One sort rule for every column, so that a param whose values mix numbers and strings still
reads sensibly: numbers (ascending), then strings (case-insensitive), then NaN, then missing.
Descending reverses the numbers and the strings; NaN and missing stay last either way, so the
best runs come first whichever way a metric is better.
"""

from __future__ import annotations

import math
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


def is_number(value) -> bool:
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
        elif is_number(value):
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


def holds(row: dict, where: Where) -> bool:
    value = value_of(row, where.column)
    if where.op in ("eq", "ne"):
        return _equals(value, where.value) == (where.op == "eq")
    if where.op == "contains":
        return value is not MISSING and where.value.casefold() in str(value).casefold()
    if not is_number(value) or math.isnan(value):
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
    if is_number(value):
        try:
            return value == float(text)
        except ValueError:
            return False
    return str(value).casefold() == text.casefold()


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
