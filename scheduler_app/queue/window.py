"""The head of the queue as a claim reads it: each account's oldest queued requests, taken in
turns between accounts by fair share (agentsys.fair_share), in one statement. What each
account asks for in all is summed from the rows read when its whole queue fits the window,
and otherwise from the last sum of the whole queue (scheduler_app.queue.queued_gpus, a few
seconds old), read in the same statement.

The accounts with queued requests are found by a loose index scan (one index probe per
account, not a read of the whole queue), and each account's head is read in arrival order on
sched_queue_account_idx; the GPUs each account has in use come in the same statement. A
request whose agent row was deleted cannot start: it is skipped here and cancelled at
heartbeat. One held by its paused parent (a research loop paused while its experiments
queued) is skipped too, and rechecked under the lock where it is placed."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field

from agentsys.fair_share import fair_order
from agentsys.scheduling import QueuedRequest, host_meets
from agentsys.stop_rules import time_limit


@dataclass(frozen=True)
class Window:
    requests: list[QueuedRequest]  # in the order the queue takes them
    host_total: int  # the claiming host's enabled GPUs
    read: int  # rows read
    more: bool  # some account has more queued than was read
    # account -> (GPUs in use, GPUs asked for in all: in use and queued), as fair share weighs
    asks: dict[str, tuple[int, int]] = field(default_factory=dict)


_WINDOW = """
    WITH RECURSIVE accounts AS (
        (SELECT account FROM scheduler_app_schedulerequest
         WHERE status = 'queued' ORDER BY account LIMIT 1)
        UNION ALL
        SELECT (SELECT r.account FROM scheduler_app_schedulerequest AS r
                WHERE r.status = 'queued' AND r.account > a.account
                ORDER BY r.account LIMIT 1)
        FROM accounts AS a WHERE a.account IS NOT NULL
    ), in_use AS (
        SELECT a.account, coalesce(sum(cardinality(u.gpu_indices)), 0) AS gpus,
               (SELECT q.gpus FROM scheduler_app_queuedask AS q
                WHERE q.account = a.account) AS summed
        FROM accounts AS a
        LEFT JOIN scheduler_app_schedulerequest AS u
               ON u.status = 'running' AND u.account = a.account
        WHERE a.account IS NOT NULL
        GROUP BY a.account
    )
    SELECT a.account, a.gpus, a.summed,
           (SELECT count(*) FROM scheduler_app_gpu WHERE host_id = %(host)s AND enabled),
           (SELECT labels FROM scheduler_app_host WHERE id = %(host)s),
           w.id, w.gpu_required, w.agent_id, w.requires, w.held, w.stop_when
    FROM in_use AS a
    CROSS JOIN LATERAL (
        SELECT r.id, r.gpu_required, r.agent_id, r.requires, r.created_at,
               EXISTS (SELECT 1 FROM agents_app_agent AS child
                       JOIN agents_app_agent AS parent ON parent.id = child.parent_id
                       WHERE child.id = r.agent_id AND parent.status = 'paused') AS held,
               r.config -> 'stop_when' AS stop_when
        FROM scheduler_app_schedulerequest AS r
        WHERE r.status = 'queued' AND r.account = a.account AND r.backend <> 'slurm'
        ORDER BY r.created_at, r.id
        LIMIT %(size)s
        {lock}
    ) AS w
    ORDER BY a.account, w.created_at, w.id
"""
# Row locks live in the rows, not in PostgreSQL's shared lock table: a window of hundreds
# costs no shared memory. They go at the claim's commit.
_LOCKED_WINDOW = _WINDOW.format(lock="FOR UPDATE OF r SKIP LOCKED")
_READ_WINDOW = _WINDOW.format(lock="")


def read_window(
    cursor,
    host_id: int | None,
    size: int,
    shares: Mapping[str, float] | None,
    *,
    lock: bool = False,
) -> Window:
    """Up to `size` requests this host could run (`host_id` None: any host, for the queue
    page), in fair-share order (`shares`: a person's share by account; AGENTSYS_QUEUE_SHARES).
    Held requests (a deleted agent, a paused parent) are left out either way. `lock`: the
    requests read stay locked until the transaction ends, and those another transaction has
    locked are skipped (scheduler_app.queue.claims: hosts claiming at once)."""
    shares = shares or {}
    statement = _LOCKED_WINDOW if lock else _READ_WINDOW
    cursor.execute(statement, {"host": host_id, "size": size}, prepare=True)
    rows = cursor.fetchall()
    if not rows:
        return Window([], 0, 0, False)
    labels = _object(rows[0][4])
    heads: dict[str, list[QueuedRequest]] = {}
    in_use: dict[str, int] = {}
    read: dict[str, int] = {}
    queued: dict[str, int] = {}  # GPUs asked for by the rows read, held ones too
    summed: dict[str, int] = {}  # the last sum of the account's whole queue
    for row in rows:
        account, used, last_sum, _, _, request_id, gpus, agent_id, requires, held, stop = row
        in_use[account], summed[account] = used, last_sum
        read[account] = read.get(account, 0) + 1
        queued[account] = queued.get(account, 0) + gpus
        heads.setdefault(account, [])
        requires = _object(requires) if requires not in ("{}", {}) else {}
        # A request this host has not the labels for can never run here: it holds nothing.
        elsewhere = host_id is not None and requires and not host_meets(labels, requires)
        if agent_id is None or held or elsewhere:
            continue
        limit = time_limit(json.loads(stop) if isinstance(stop, str) else stop)
        heads[account].append(QueuedRequest(request_id, gpus, requires, limit))
    longer = [account for account, count in read.items() if count == size]
    for account in longer:  # the window saw only the start of these queues
        queued[account] = max(queued[account], summed[account] or 0)
    return Window(
        fair_order(heads, in_use, shares, size, queued),
        host_total=rows[0][3],
        read=len(rows),
        more=bool(longer),
        asks={account: (in_use[account], in_use[account] + queued[account]) for account in read},
    )


def _object(value) -> dict:
    """A jsonb column read through Django's connection arrives as text (Django loads JSON
    itself); anything but an object counts as none."""
    value = json.loads(value) if isinstance(value, str) else value
    return value if isinstance(value, dict) else {}
