"""The sweep table: every run of a sweep side by side, its params against its metrics.

Columns: the run's own (name, status, created_at, duration_s, exit_code), one per param name
any run of the sweep has (`param.<name>`: the run's `params`, then what its trackers logged
that it does not set itself), and three per metric key (`metric.<key>.last|min|max`, from its
series, whatever source wrote them). How each sorts and filters:
scheduler_app.sweep_table_rules.

A page is read in two steps, so that a sweep of 10^4 runs costs what its sort and filters
look at (`bench/ui.py` sweep_table_api_10000_runs_ms): first every run's own columns plus
only the cells the sort and the filters name (one query: a param is read out of the JSON in
PostgreSQL, a metric is a join on its key), filtered and sorted here; then the whole rows of
the page's runs. The CSV reads every row whole.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.db import connection

from scheduler_app.models import Sweep
from scheduler_app.sweep_table_rules import (
    MISSING,
    BadTableQuery,
    checked_statuses,
    holds,
    parse_where,
    sort_rows,
    value_of,
)

__all__ = ["MISSING", "BadTableQuery", "Table", "sweep_table", "value_of"]

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

# A run's params over what its trackers logged; anything but a JSON object counts as none.
PARAMS = (
    "(CASE WHEN jsonb_typeof(r.logged_params) = 'object' THEN r.logged_params "
    "ELSE '{}'::jsonb END || CASE WHEN jsonb_typeof(r.params) = 'object' THEN r.params "
    "ELSE '{}'::jsonb END)"
)
# Times as epoch seconds: converting 10^4 datetimes in Python cost more than the query.
RUN_CELLS = (
    "r.id, r.name, r.status, r.exit_code, r.agent_id, "
    "EXTRACT(EPOCH FROM r.created_at)::float8, EXTRACT(EPOCH FROM r.finished_at)::float8, "
    "EXTRACT(EPOCH FROM r.finished_at - r.started_at)::float8"
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
    columns = table_columns(sweep)
    known = {column["id"] for column in columns}
    clauses = [parse_where(text, known) for text in (where or [])[: MAX_WHERE + 1]]
    if len(clauses) > MAX_WHERE:
        raise BadTableQuery(f"at most {MAX_WHERE} where clauses")
    wanted = checked_statuses(statuses or [])
    if limit is None:
        rows = _whole_rows(sweep)
    else:
        rows = _cells(sweep, {sort.removeprefix("-")} | {c.column for c in clauses})
    kept = [
        row
        for row in rows
        if (not wanted or row["status"] in wanted) and all(holds(row, c) for c in clauses)
    ]
    ordered = sort_rows(kept, sort, known)
    if limit is not None:
        page = [row["run_id"] for row in ordered[offset : offset + limit]]
        by_id = {row["run_id"]: row for row in _whole_rows(sweep, page)}
        ordered_page = [by_id[run_id] for run_id in page if run_id in by_id]
        return Table(sweep, columns, ordered_page, len(ordered), len(rows))
    return Table(sweep, columns, ordered, len(ordered), len(rows))


def table_columns(sweep: Sweep) -> list[dict]:
    columns = [
        {"id": name, "kind": "run", "label": name.replace("_", " "), "type": kind}
        for name, kind in RUN_COLUMNS.items()
    ]
    with connection.cursor() as cursor:
        params = _param_types(cursor, sweep.pk)
        cursor.execute(METRIC_KEYS_SQL, [sweep.pk])
        keys = [key for (key,) in cursor]
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
    return columns


# Reading every param of 10^4 runs for their types is most of a table's time, and they
# change only when a run joins, is edited or records what its trackers logged (each moves
# the run's updated_at): kept per process, by sweep, while the runs' count and latest
# updated_at stay the same.
_PARAM_TYPES: dict[str, tuple[tuple, list[tuple[str, str | None]]]] = {}
MAX_CACHED_SWEEPS = 64
FINGERPRINT_SQL = "SELECT count(*), max(updated_at) FROM scheduler_app_run WHERE sweep_id = %s"


def _param_types(cursor, sweep_id: str) -> list[tuple[str, str | None]]:
    cursor.execute(FINGERPRINT_SQL, [sweep_id])
    fingerprint = tuple(cursor.fetchone())
    cached = _PARAM_TYPES.get(sweep_id)
    if cached is not None and cached[0] == fingerprint:
        return cached[1]
    cursor.execute(PARAM_TYPES_SQL, [sweep_id])
    params = [(name, _param_type(types)) for name, types in cursor]
    if len(_PARAM_TYPES) >= MAX_CACHED_SWEEPS:
        _PARAM_TYPES.pop(next(iter(_PARAM_TYPES)), None)
    _PARAM_TYPES[sweep_id] = (fingerprint, params)
    return params


def _param_type(json_types) -> str | None:
    """number, string (booleans too), mixed, or None for a name that only ever holds objects,
    arrays or null (not a column)."""
    types = set(json_types) - {"object", "array", "null"}
    if not types:
        return None
    if types == {"number"}:
        return "number"
    return "mixed" if "number" in types else "string"


def _row(run_id, name, status, code, agent_id, created, finished, duration) -> dict:
    return {
        "run_id": run_id,
        "name": name,
        "status": status,
        "exit_code": code,
        "agent_id": agent_id,
        "created_at": created,
        "finished_at": finished,
        "duration_s": duration,
        "params": {},
        "metrics": {},
    }


# The run's own columns as the first, slim read selects them (id, status and creation time
# always: the status filter and the sort's tie-break need them).
RUN_CELL_SQL = {
    "name": "r.name",
    "exit_code": "r.exit_code",
    "duration_s": "EXTRACT(EPOCH FROM r.finished_at - r.started_at)::float8",
}
STAT_SQL = {"last": "last_value", "min": "min_value", "max": "max_value"}


def _cells(sweep: Sweep, columns: set[str]) -> list[dict]:
    """Every run's id, status and creation time, and the cells of `columns` (known ids)."""
    own = sorted(c for c in columns if c in RUN_CELL_SQL)
    params = sorted(c.removeprefix("param.") for c in columns if c.startswith("param."))
    stats = sorted(
        c.removeprefix("metric.").rpartition(".")[::2] for c in columns if c.startswith("metric.")
    )
    keys = sorted({key for key, _ in stats})
    selects = ["r.id", "r.status", "EXTRACT(EPOCH FROM r.created_at)::float8"]
    selects += [RUN_CELL_SQL[c] for c in own]
    selects += [f"{PARAMS} -> %s::text" for _ in params]
    selects += [f"m{keys.index(key)}.{STAT_SQL[stat]}" for key, stat in stats]
    joins = [
        f"LEFT JOIN scheduler_app_metricseries m{index} "
        f"ON m{index}.run_id = r.id AND m{index}.key = %s"
        for index in range(len(keys))
    ]
    sql = (
        f"SELECT {', '.join(selects)} FROM scheduler_app_run r "  # noqa: S608
        f"{' '.join(joins)} WHERE r.sweep_id = %s"
    )
    rows = []
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, *keys, sweep.pk])
        for run_id, status, created, *rest in cursor:
            row = {"run_id": run_id, "status": status, "created_at": created}
            row.update(zip(own, rest, strict=False))
            rest = rest[len(own) :]
            found = row["params"] = {}
            for name, text in zip(params, rest, strict=False):
                value = json.loads(text) if isinstance(text, str) else text  # jsonb as text
                if value is not None and not isinstance(value, dict | list):
                    found[name] = value
            metrics = row["metrics"] = {}
            for (key, stat), value in zip(stats, rest[len(params) :], strict=False):
                metrics.setdefault(key, {})[stat] = value
            rows.append(row)
    return rows


def _whole_rows(sweep: Sweep, run_ids: list[str] | None = None) -> list[dict]:
    """Whole rows (every param, every series) of the sweep's runs, or of `run_ids` only."""
    only = "" if run_ids is None else " AND r.id = ANY(%s)"
    arguments = [sweep.pk] if run_ids is None else [sweep.pk, run_ids]
    by_run: dict[str, dict] = {}
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {RUN_CELLS}, {PARAMS} FROM scheduler_app_run r "  # noqa: S608
            f"WHERE r.sweep_id = %s{only}",
            arguments,
        )
        for record in cursor:
            row = _row(*record[:8])
            row["params"] = _scalars(record[8])
            by_run[row["run_id"]] = row
        cursor.execute(
            f"SELECT {SERIES_CELLS} FROM scheduler_app_metricseries s "  # noqa: S608
            f"JOIN scheduler_app_run r ON r.id = s.run_id WHERE r.sweep_id = %s{only}",
            arguments,
        )
        for run_id, key, last, low, high, last_step, points, source in cursor:
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
