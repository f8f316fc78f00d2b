"""The sweep table: every run of a sweep side by side, its params against its metrics.

Columns: the run's own (name, status, created_at, duration_s, exit_code), one per param name
any run of the sweep has (`param.<name>`: the run's `params`, then what its trackers logged
that it does not set itself), and three per metric key (`metric.<key>.last|min|max`, from its
series, whatever source wrote them). How each sorts and filters:
scheduler_app.sweeps.table_rules.

A page is read in two steps, so that a sweep of 10^4 runs costs what its sort and filters
look at (`bench/ui.py` sweep_table_api_10000_runs_ms): first the ids of the page's runs, in
order, and how many runs pass, from one query that filters, sorts and pages in PostgreSQL
(scheduler_app.sweeps.table_sql); then the whole rows of those runs. The CSV is every run that
passes, whole.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from django.db import connection

from scheduler_app.models import Sweep
from scheduler_app.sweeps.groups import Group, group_rows, is_seed, sort_groups
from scheduler_app.sweeps.table_rules import (
    MISSING,
    BadTableQuery,
    checked_statuses,
    parse_where,
    value_of,
)
from scheduler_app.sweeps.table_sql import PARAMS, Query

__all__ = [
    "MISSING",
    "BadTableQuery",
    "GroupedTable",
    "Table",
    "grouped_table",
    "sweep_table",
    "value_of",
]

RUN_COLUMNS = {
    "name": "string",
    "status": "string",
    "created_at": "date",  # epoch seconds in rows; the API writes ISO 8601
    "duration_s": "number",
    "exit_code": "number",
}
STATS = ("last", "min", "max")
MAX_WHERE = 20

# The SQL below is built from this module's constants only (ruff's S608 is told so where it
# is joined); every value a request brings, a sweep id, a param name or a metric key, is a
# bind parameter.

# Times as epoch seconds: converting 10^4 datetimes in Python cost more than the query.
RUN_CELLS = (
    "r.id, r.name, r.status, r.exit_code, r.agent_id, "
    "EXTRACT(EPOCH FROM r.created_at)::float8, EXTRACT(EPOCH FROM r.finished_at)::float8, "
    "EXTRACT(EPOCH FROM r.finished_at - r.started_at)::float8, r.stopped_by"
)
PARAM_TYPES_SQL = (
    "SELECT p.key, array_agg(DISTINCT jsonb_typeof(p.value)) "  # noqa: S608
    f"FROM scheduler_app_run r, jsonb_each({PARAMS}) p "
    "WHERE r.sweep_id = %s GROUP BY p.key ORDER BY p.key"
)
METRIC_KEYS_SQL = """
SELECT DISTINCT s.key FROM scheduler_app_metricseries s
JOIN scheduler_app_run r ON r.id = s.run_id WHERE r.sweep_id = %s ORDER BY 1
"""
SERIES_CELLS = (
    "s.run_id, s.key, s.last_value, s.min_value, s.max_value, s.last_step, s.points, s.source"
)


@dataclass
class Table:
    sweep: Sweep
    columns: list[dict]
    rows: list[dict]  # the page's (or, without a limit, every row), filtered and sorted
    total: int  # rows that pass the filters
    run_count: int  # every run of the sweep


def sweep_table(
    sweep: Sweep,
    *,
    sort: str = "-created_at",
    statuses: list[str] | None = None,
    where: list[str] | None = None,
    offset: int = 0,
    limit: int | None = None,
) -> Table:
    """The sweep's rows filtered and sorted, `limit` of them from `offset` (every one when
    `limit` is None). Raises BadTableQuery naming what cannot be applied."""
    columns, run_count = table_columns(sweep)
    known = {column["id"] for column in columns}
    if sort.removeprefix("-") not in known:
        raise BadTableQuery(f"sort: no column {sort.removeprefix('-')!r} in this sweep")
    clauses = [parse_where(text, known) for text in (where or [])[: MAX_WHERE + 1]]
    if len(clauses) > MAX_WHERE:
        raise BadTableQuery(f"at most {MAX_WHERE} where clauses")
    query = Query(sweep.pk)
    for clause in clauses:
        query.where(clause)
    sql, arguments = query.sql(sort, checked_statuses(statuses or []), paged=limit is not None)
    page, total = _page(sql, arguments, offset, limit)
    by_id = {row["run_id"]: row for row in _whole_rows(sweep, page if limit is not None else None)}
    rows = [by_id[run_id] for run_id in page if run_id in by_id]
    return Table(sweep, columns, rows, total, run_count)


@dataclass
class GroupedTable:
    sweep: Sweep
    columns: list[dict]
    groups: list[Group]  # the page's, sorted
    total: int  # groups of the runs that pass the filters
    runs_total: int  # runs that pass the filters
    run_count: int  # every run of the sweep


def grouped_table(
    sweep: Sweep,
    *,
    sort: str = "-created_at",
    statuses: list[str] | None = None,
    where: list[str] | None = None,
    offset: int = 0,
    limit: int | None = None,
) -> GroupedTable:
    """The seed groups (scheduler_app.sweeps.groups) of the runs that pass the filters,
    sorted, `limit` of them from `offset`. Groups are formed in Python from every run that
    passes (a group's runs may lie on any page of runs), so this reads them all, as the CSV
    does; the plain table reads a page's only."""
    table = sweep_table(sweep, sort=sort, statuses=statuses, where=where)
    params, commands = _every_param(sweep, table.rows)
    groups = sort_groups(group_rows(table.rows, params, commands), sort)
    end = None if limit is None else offset + limit
    return GroupedTable(
        sweep, table.columns, groups[offset:end], len(groups), table.total, table.run_count
    )


def seed_columns(columns: list[dict]) -> list[str]:
    """The param columns that hold a seed (those the groups leave out of their key)."""
    return [c["id"] for c in columns if c["kind"] == "param" and is_seed(c["label"])]


def _every_param(sweep: Sweep, rows: list[dict]) -> tuple[dict[str, dict], dict[str, str]]:
    """Each run's params, objects and lists too (a row holds its scalars only), and its
    command (runs of two scripts are no seed group)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT r.id, {PARAMS}, r.command FROM scheduler_app_run r "  # noqa: S608
            "WHERE r.sweep_id = %s AND r.id = ANY(%s)",
            [sweep.pk, [row["run_id"] for row in rows]],
        )
        found = {run_id: (json.loads(p) if isinstance(p, str) else p, c) for run_id, p, c in cursor}
    params = {run_id: p if isinstance(p, dict) else {} for run_id, (p, _) in found.items()}
    return params, {run_id: c or "" for run_id, (_, c) in found.items()}


def _page(sql: str, arguments: list, offset: int, limit: int | None) -> tuple[list[str], int]:
    """The ids of the page's runs in order (every one's without a limit), and how many pass."""
    with connection.cursor() as cursor:
        cursor.execute(sql, arguments if limit is None else [*arguments, limit, offset])
        found = cursor.fetchall()
        if not found and offset and limit is not None:  # past the end: count them all
            cursor.execute(sql, [*arguments, 1, 0])
            total = next((count for _, count in cursor), 0)
        else:
            total = found[0][1] if found else 0
    return list(dict.fromkeys(run_id for run_id, _ in found)), total


def table_columns(sweep: Sweep) -> tuple[list[dict], int]:
    """The sweep's columns, and how many runs it has."""
    columns = [
        {"id": name, "kind": "run", "label": name.replace("_", " "), "type": kind}
        for name, kind in RUN_COLUMNS.items()
    ]
    params, keys, run_count = _names(sweep.pk)
    columns += [
        {"id": f"param.{name}", "kind": "param", "label": name, "type": kind}
        for name, kind in params
        if kind
    ]
    for key in keys:
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
    return columns, run_count


# Reading every param of 10^4 runs for their types, and every series for its key, is most of
# a table's time, and neither changes but when a run joins, is edited or records what its
# trackers logged (each moves the run's updated_at), or a key is first logged (a new series,
# whose id is the newest): kept per process, by sweep, while these stay the same, and for
# MAX_AGE_S at most (a series whose transaction ends after a newer one's is seen by then).
_NAMES: dict[str, tuple[tuple, float, list[tuple[str, str | None]], list[str]]] = {}
MAX_CACHED_SWEEPS = 64
MAX_AGE_S = 10.0
FINGERPRINT_SQL = (
    "SELECT count(*), max(updated_at), (SELECT max(id) FROM scheduler_app_metricseries) "
    "FROM scheduler_app_run WHERE sweep_id = %s"
)


def _names(sweep_id: str) -> tuple[list[tuple[str, str | None]], list[str], int]:
    """Each param name with its type, each metric key, and the sweep's run count."""
    with connection.cursor() as cursor:
        cursor.execute(FINGERPRINT_SQL, [sweep_id])
        fingerprint = tuple(cursor.fetchone())
        cached = _NAMES.get(sweep_id)
        if (
            cached is not None
            and cached[0] == fingerprint
            and time.monotonic() - cached[1] < MAX_AGE_S
        ):
            return cached[2], cached[3], fingerprint[0]
        read_at = time.monotonic()
        cursor.execute(PARAM_TYPES_SQL, [sweep_id])
        params = [(name, _param_type(types)) for name, types in cursor]
        cursor.execute(METRIC_KEYS_SQL, [sweep_id])
        keys = [key for (key,) in cursor]
    _NAMES.pop(sweep_id, None)
    if len(_NAMES) >= MAX_CACHED_SWEEPS:
        _NAMES.pop(next(iter(_NAMES)), None)
    _NAMES[sweep_id] = (fingerprint, read_at, params, keys)
    return params, keys, fingerprint[0]


def _param_type(json_types) -> str | None:
    """number, string (booleans too), mixed, or None for a name that only ever holds objects,
    arrays or null (not a column)."""
    types = set(json_types) - {"object", "array", "null"}
    if not types:
        return None
    if types == {"number"}:
        return "number"
    return "mixed" if "number" in types else "string"


def _row(run_id, name, status, code, agent_id, created, finished, duration, stopped_by) -> dict:
    return {
        "run_id": run_id,
        "name": name,
        "status": status,
        "stopped_by": stopped_by,
        "exit_code": code,
        "agent_id": agent_id,
        "created_at": created,
        "finished_at": finished,
        "duration_s": duration,
        "params": {},
        "metrics": {},
    }


def _whole_rows(sweep: Sweep, run_ids: list[str] | None = None) -> list[dict]:
    """Whole rows (every param, every series) of the sweep's runs, or of `run_ids` only."""
    if run_ids is None:
        runs = "r.sweep_id = %s"
        series = (
            "scheduler_app_metricseries s JOIN scheduler_app_run r ON r.id = s.run_id "
            "WHERE r.sweep_id = %s"
        )
        arguments = [sweep.pk]
    else:  # a page: its series by run (indexed), not by a join on every run (a seq scan)
        runs = "r.sweep_id = %s AND r.id = ANY(%s)"
        series = "scheduler_app_metricseries s WHERE s.run_id = ANY(%s)"
        arguments = [sweep.pk, run_ids]
    by_run: dict[str, dict] = {}
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {RUN_CELLS}, {PARAMS} FROM scheduler_app_run r WHERE {runs}",  # noqa: S608
            arguments,
        )
        for record in cursor:
            row = _row(*record[:9])
            row["params"] = _scalars(record[9])
            by_run[row["run_id"]] = row
        cursor.execute(
            f"SELECT {SERIES_CELLS} FROM {series} "  # noqa: S608
            # Were a key logged from two executors, the series updated last would win.
            "ORDER BY s.updated_at, s.id",
            arguments[-1:],
        )
        for run_id, key, last, low, high, last_step, points, source in cursor:
            if run_id in by_run:
                by_run[run_id]["metrics"][key] = {
                    "last": last,
                    "min": low,
                    "max": high,
                    "last_step": last_step,
                    "points": points,
                    "source": source,
                }
    return list(by_run.values())


def _scalars(params) -> dict:
    if isinstance(params, str):  # Django's cursor hands jsonb over as text
        params = json.loads(params)
    if not isinstance(params, dict):
        return {}
    return {k: v for k, v in params.items() if not isinstance(v, dict | list) and v is not None}
