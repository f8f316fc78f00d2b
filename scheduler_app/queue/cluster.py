"""The online hosts as a backfilling claim and the queue page see them (agentsys.backfill):
each host's enabled and free GPUs, and the GPUs its running requests hold with the time
each is expected to end (its start plus its time limit, the wall_seconds stop rule).

Two statements whatever the queue holds; a claim reads them only when a request does not fit
on its own host."""

from __future__ import annotations

import json

from django.db import connection

from agentsys.backfill import Busy, HostState
from agentsys.stop_rules import time_limit

_HOSTS = """
    SELECT h.id, h.name, h.labels,
           count(g.id) FILTER (WHERE g.enabled),
           count(g.id) FILTER (WHERE g.enabled AND g.allocated_to_id IS NULL
                               AND g.held_by_others = '[]'),
           count(g.id) FILTER (WHERE g.enabled AND g.allocated_to_id IS NULL
                               AND g.held_by_others <> '[]')
    FROM scheduler_app_host AS h LEFT JOIN scheduler_app_gpu AS g ON g.host_id = h.id
    WHERE h.status = 'online'
    GROUP BY h.id
"""

_RUNNING = """
    SELECT r.host_id, cardinality(r.gpu_indices), extract(epoch FROM r.started_at),
           r.config -> 'stop_when'
    FROM scheduler_app_schedulerequest AS r
    WHERE r.status = 'running' AND r.backend <> 'slurm' AND cardinality(r.gpu_indices) > 0
"""


def online_hosts(cursor=None) -> list[HostState]:
    """Every online host's GPUs; `cursor`: the claim's own (same transaction)."""
    if cursor is None:
        with connection.cursor() as own:
            return online_hosts(own)
    cursor.execute(_HOSTS)
    hosts = cursor.fetchall()
    cursor.execute(_RUNNING)
    busy: dict[int, list[Busy]] = {}
    for host_id, gpus, started, stop_when in cursor.fetchall():
        limit = time_limit(_json(stop_when))
        ends = float(started) + limit if limit is not None and started is not None else None
        busy.setdefault(host_id, []).append(Busy(gpus, ends))
    states = []
    for host_id, name, labels, total, free, held in hosts:
        held_busy = [Busy(held, None)] if held else []
        states.append(
            HostState(
                id=host_id,
                name=name,
                total=total,
                free=free,
                labels=_labels(labels),
                busy=tuple(busy.get(host_id, []) + held_busy),
            )
        )
    return states


def _json(value):
    """jsonb read through Django's connection arrives as text."""
    return json.loads(value) if isinstance(value, str) else value


def _labels(value) -> dict:
    value = _json(value)
    return value if isinstance(value, dict) else {}
