"""The sweep table's rules (scheduler_app.sweeps.table_rules) as one PostgreSQL query: which
runs pass the status and the where clauses, in the sort's order, a page of them and how many
pass in all, so that a page of a sweep of 10^4 runs brings 10^4 ids no further than the
database (`bench/ui.py` sweep_table_api_10000_runs_ms).

Each column the query names is read once, in an inner select, as one cell per run: a param
as JSON (its number compares as `numeric`, exactly, as Python compares a JSON number), a
metric's stat or a run's time or exit code as float8 (NaN and ±inf as they are), a name or a
status as text. The outer select reads three things off each cell: its number (NULL for NaN
and for what is not a number), its text (a string's, a boolean's as `true`/`false`) and its
place in the sort: numbers, strings, NaN, missing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import Decimal

from scheduler_app.sweeps.table_rules import Where

# The SQL below is built from this module's constants and the column's index only (ruff's
# S608 is told so where it is joined); what a request brings, a sweep id, a status, a param
# name, a metric key or a value, is a bind parameter.

# A run's params over what its trackers logged; anything but a JSON object counts as none.
PARAMS = (
    "(CASE WHEN jsonb_typeof(r.logged_params) = 'object' THEN r.logged_params "
    "ELSE '{}'::jsonb END || CASE WHEN jsonb_typeof(r.params) = 'object' THEN r.params "
    "ELSE '{}'::jsonb END)"
)
RUN_CELL_SQL = {  # each a float8, or text for name and status
    "name": "r.name",
    "status": "r.status",
    "created_at": "EXTRACT(EPOCH FROM r.created_at)::float8",
    "duration_s": "EXTRACT(EPOCH FROM r.finished_at - r.started_at)::float8",
    "exit_code": "r.exit_code::float8",
}
TEXT_COLUMNS = frozenset({"name", "status"})
STAT_SQL = {"last": "last_value", "min": "min_value", "max": "max_value"}
# A run has one series per key: its series are its executor's, and a run starts (gets an
# executor) only if it never ran. A plain join is half the time of a lateral one that would
# pick one series of several (sweep_table drops a run met twice, should it ever be).
SERIES_SQL = (
    "LEFT JOIN scheduler_app_metricseries m{index} ON m{index}.run_id = r.id AND m{index}.key = %s"
)
# Python's casefold() and PostgreSQL's lower() agree but on a few letters (ß); strings sort
# by their code points, as Python's do, whatever the database's collation.
FOLD = "lower({})"
ORDER_TEXT = 'lower({}) COLLATE "C"'


@dataclass(frozen=True)
class Cell:
    """One column's cell as the outer select reads it (`t.c<index>`)."""

    kind: str  # "json" (a param), "float" or "text"
    ref: str

    @property
    def number(self) -> str:
        if self.kind == "json":
            return f"(CASE WHEN jsonb_typeof({self.ref}) = 'number' THEN {self.ref}::numeric END)"
        return "NULL" if self.kind == "text" else f"NULLIF({self.ref}, 'NaN'::float8)"

    @property
    def text(self) -> str:
        """A string's text, a boolean's as `true` or `false` (as Python's str() of either,
        folded); NULL for the rest."""
        if self.kind == "json":
            return (
                f"(CASE WHEN jsonb_typeof({self.ref}) IN ('string', 'boolean') "
                f"THEN {self.ref} #>> '{{}}' END)"
            )
        return self.ref if self.kind == "text" else "NULL"

    @property
    def written(self) -> str:
        """Any value's text, for `contains` (a number as PostgreSQL writes it)."""
        if self.kind == "json":
            return (
                f"(CASE WHEN jsonb_typeof({self.ref}) IN ('number', 'string', 'boolean') "
                f"THEN {self.ref} #>> '{{}}' END)"
            )
        return f"{self.ref}::text"

    @property
    def group(self) -> str:
        """0 a number, 1 a string, 2 NaN, 3 missing."""
        if self.kind == "json":
            return (
                f"(CASE jsonb_typeof({self.ref}) WHEN 'number' THEN 0 WHEN 'string' THEN 1 "
                "WHEN 'boolean' THEN 1 ELSE 3 END)"
            )
        if self.kind == "text":
            return f"(CASE WHEN {self.ref} IS NULL THEN 3 ELSE 1 END)"
        return f"(CASE WHEN {self.ref} IS NULL THEN 3 WHEN {self.ref} = 'NaN' THEN 2 ELSE 0 END)"


@dataclass
class Query:
    """The page query, built up with its bind parameters in the order they appear."""

    sweep_id: str
    selects: list[str] = field(default_factory=list)
    select_args: list = field(default_factory=list)
    joins: list[str] = field(default_factory=list)
    join_args: list = field(default_factory=list)
    wheres: list[str] = field(default_factory=list)
    where_args: list = field(default_factory=list)
    cells: dict[str, Cell] = field(default_factory=dict)

    def cell(self, column: str) -> Cell:
        """The cell of `column` (a known column id), selected once however often named."""
        if column in self.cells:
            return self.cells[column]
        index = len(self.cells)
        kind, _, rest = column.partition(".")
        if kind == "param":
            self.selects.append(f"{PARAMS} -> %s::text")
            self.select_args.append(rest)
            cell = Cell("json", f"t.c{index}")
        elif kind == "metric":
            key, _, stat = rest.rpartition(".")
            self.joins.append(SERIES_SQL.format(index=index))
            self.join_args.append(key)
            self.selects.append(f"m{index}.{STAT_SQL[stat]}")
            cell = Cell("float", f"t.c{index}")
        else:
            self.selects.append(RUN_CELL_SQL[column])
            cell = Cell("text" if column in TEXT_COLUMNS else "float", f"t.c{index}")
        self.selects[-1] += f" AS c{index}"
        self.cells[column] = cell
        return cell

    def where(self, clause: Where) -> None:
        sql, args = condition(self.cell(clause.column), clause)
        self.wheres.append(sql)
        self.where_args += args

    def sql(self, sort: str, statuses: set[str], paged: bool) -> tuple[str, list]:
        """SELECT id, total: the runs that pass, in order (LIMIT and OFFSET bound last when
        `paged`)."""
        order = order_by(self.cell(sort.removeprefix("-")), descending=sort.startswith("-"))
        inner_where = "r.sweep_id = %s" + (" AND r.status = ANY(%s)" if statuses else "")
        inner_args = [self.sweep_id] + ([sorted(statuses)] if statuses else [])
        selects = ", ".join(["r.id", "r.created_at", *self.selects])
        sql = (
            f"SELECT t.id, count(*) OVER () FROM (SELECT {selects} "  # noqa: S608
            f"FROM scheduler_app_run r {' '.join(self.joins)} WHERE {inner_where}) t "
            f"WHERE {' AND '.join(self.wheres) or 'TRUE'} ORDER BY {order}"
            + (" LIMIT %s OFFSET %s" if paged else "")
        )
        return sql, [*self.select_args, *self.join_args, *inner_args, *self.where_args]


def order_by(cell: Cell, *, descending: bool) -> str:
    """Numbers, strings, NaN, missing; descending reverses the numbers and the strings only.
    Ties: the newest run first, then by id, so that pages never share or skip a run."""
    way = " DESC" if descending else ""
    keys = [cell.group]
    if cell.kind != "text":
        keys.append(f"{cell.number}{way}")
    if cell.kind != "float":
        keys.append(ORDER_TEXT.format(cell.text) + way)
    return ", ".join([*keys, "t.created_at DESC", "t.id DESC"])


def condition(cell: Cell, where: Where) -> tuple[str, list]:
    """Whether a run's cell passes `where`: eq/ne compare a number as a number (`0.10` is
    0.1) and a string, folded, as a string (a missing value is `ne` anything); contains
    looks in any value's text; a range holds numbers only (never NaN)."""
    if where.op in ("eq", "ne"):
        sql, args = equals(cell, where.value)
        return (sql if where.op == "eq" else f"NOT {sql}"), args
    if where.op == "contains":
        found = f"strpos({FOLD.format(cell.written)}, {FOLD.format('%s')}) > 0"
        return f"COALESCE({found}, FALSE)", [where.value]
    if where.op == "between":
        low, high = where.numbers
        sql_low, low_args = compare(cell, "ge", low)
        sql_high, high_args = compare(cell, "le", high)
        return f"({sql_low} AND {sql_high})", low_args + high_args
    return compare(cell, where.op, where.numbers[0])


def equals(cell: Cell, text: str) -> tuple[str, list]:
    parts, args = [], []
    if cell.kind != "float":  # a string (or a boolean's word) equal to the text, folded
        parts.append(f"COALESCE({FOLD.format(cell.text)} = {FOLD.format('%s')}, FALSE)")
        args.append(text)
    try:
        number = float(text)
    except ValueError:
        number = math.nan  # equal to no number
    if not math.isnan(number) and cell.kind != "text":
        sql, number_args = compare(cell, "eq", number)
        parts.append(sql)
        args += number_args
    return f"({' OR '.join(parts) or 'FALSE'})", args


SQL_OPS = {"eq": "=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def compare(cell: Cell, op: str, bound: float) -> tuple[str, list]:
    """`cell op bound`, false where the cell holds no number or NaN, or the bound is NaN."""
    if math.isnan(bound):
        return "FALSE", []
    number = cell.number
    if cell.kind == "json" and math.isinf(bound):
        # No JSON number is infinite (and numeric has no infinity before PostgreSQL 14).
        every_number = op != "eq" and (bound > 0) == (op in ("lt", "le"))
        return (f"({number} IS NOT NULL)" if every_number else "FALSE"), []
    if cell.kind == "json":
        return f"COALESCE({number} {SQL_OPS[op]} %s, FALSE)", [exact(bound)]
    return f"COALESCE({number} {SQL_OPS[op]} %s, FALSE)", [bound]


def exact(bound: float) -> Decimal:
    """`bound` as a numeric that compares with a JSON number as Python compares the float:
    the shortest decimal that reads back as it (what Python writes a float param as), or
    the whole number it is (2**60 is not 1.152921504606847e18)."""
    return Decimal(int(bound)) if bound.is_integer() else Decimal(repr(bound))
