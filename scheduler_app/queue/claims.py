"""The executor queue on PostgreSQL: submit, claim (row locks, SKIP LOCKED), release, cancel.

Every GPU row names the one request holding it, so a GPU can never be given twice; claims
lock the host's free GPU rows and the queued requests they consider. A NOTIFY on
`agentsys_queue` (sent at commit) wakes every daemon when work arrives or GPUs free up.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass

import psycopg
from django.db import connection, transaction
from django.db.models import Count, Max, Q
from django.utils import timezone

from agents_app.models import Agent
from agentsys.backfill import ClaimContext
from agentsys.listen import QUEUE_CHANNEL
from agentsys.scheduling import (
    CLAIM_WINDOW,
    FIRST_WINDOW,
    InvalidLabels,
    SchedulingPolicy,
    describe_requires,
    first_window,
    host_meets,
    validate_requires,
)
from agentsys.types import AgentStatus, RequestStatus
from common.ids import create_with_unique_id
from hosts_app.models import Host, HostStatus
from scheduler_app.models import GPU, Run, RunStatus, ScheduleRequest, new_request_id
from scheduler_app.queue import queued_gpus
from scheduler_app.queue.accounts import accounts_of
from scheduler_app.queue.cluster import online_hosts
from scheduler_app.queue.window import read_window


class InvalidRequest(ValueError):
    """A submission that can never be valid (bad gpu_required): the caller's mistake."""


def notify_queue() -> None:
    with connection.cursor() as cursor:  # delivered at commit
        cursor.execute("SELECT pg_notify(%s, '')", [QUEUE_CHANNEL])


# A request's end in one round trip: its GPUs freed, its row ended, and the daemons woken (the
# NOTIFY is delivered at commit). Data-modifying WITH parts run whether or not read.
_END_REQUEST = """
    WITH freed AS (
        UPDATE scheduler_app_gpu SET allocated_to_id = NULL, allocated_at = NULL
        WHERE allocated_to_id = %(request)s
    ), ended AS (
        UPDATE scheduler_app_schedulerequest SET status = %(status)s, finished_at = %(now)s
        WHERE id = %(request)s
    )
    SELECT pg_notify(%(channel)s, '')
"""


def end_request(request_id: str, *, status: str, now) -> None:
    """The request (row-locked by the caller) ends as `status`: its GPUs are free, and the
    next claim need not wait for a poll."""
    with connection.cursor() as cursor:
        cursor.execute(
            _END_REQUEST,
            {"request": request_id, "status": status, "now": now, "channel": QUEUE_CHANNEL},
        )


def validate_gpu_required(value) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidRequest(f"gpu_required must be a whole number ≥ 0, got {value!r}")
    if value < 0:
        raise InvalidRequest(f"gpu_required must be ≥ 0, got {value}")
    return value


SLURM = "slurm"  # the backend whose requests SLURM places (agentsys.slurm.job)


def rejection_reason(
    gpu_required: int, backend: str = "subprocess", requires: dict | None = None
) -> str | None:
    """Why a request can never run here, or None. Hosts marked dead do not count."""
    if backend == SLURM:
        return _slurm_rejection()
    if requires:
        return _labels_rejection(gpu_required, requires)
    if gpu_required == 0:
        return None
    largest = (
        GPU.objects.filter(enabled=True)
        .exclude(host__status=HostStatus.DEAD)
        .values("host")
        .annotate(n=Count("id"))
        .aggregate(m=Max("n"))["m"]
        or 0
    )
    if gpu_required <= largest:
        return None
    reason = f"Requires {gpu_required} GPUs but only {largest} available"
    if largest == 0:
        reason += " (no host has GPUs: declare them with AGENTSYS_GPUS, or configure SLURM)"
    return reason


def _labels_rejection(gpu_required: int, requires: dict) -> str | None:
    """None when some host that is not dead has the labels and the GPUs; else why not, with
    what each host has."""
    hosts = list(
        Host.objects.exclude(status=HostStatus.DEAD)
        .annotate(n=Count("gpus", filter=Q(gpus__enabled=True)))
        .values_list("name", "labels", "n")
    )
    if any(host_meets(labels or {}, requires) and n >= gpu_required for _, labels, n in hosts):
        return None
    have = "; ".join(
        f"{name}: {n} GPU(s), "
        + (", ".join(f"{k}={v}" for k, v in sorted(labels.items())) or "no labels")
        for name, labels, n in hosts
    )
    return (
        f"No host has {describe_requires(requires)}"
        + (f" with {gpu_required} GPUs" if gpu_required else "")
        + f" (hosts: {have or 'none registered'}). Declare labels with AGENTSYS_HOST_LABELS"
    )


def _slurm_rejection() -> str | None:
    """SLURM itself judges the GPUs (sbatch refuses what no node has); here only whether
    some host's runagentd can submit to it at all."""
    hosts = Host.objects.exclude(status=HostStatus.DEAD)
    if hosts.filter(info__slurm=True).exists():
        return None
    return (
        "No host runs SLURM: start runagentd where sbatch works (it looks for SLURM at start; "
        "AGENTSYS_SLURM=on requires it)"
    )


def route(config: dict) -> tuple[str, dict]:
    """The backend and the host labels of an executor's request, from its config."""
    backend = SLURM if config.get("backend") == SLURM else "subprocess"
    try:
        return backend, validate_requires(config.get("requires"))
    except InvalidLabels as error:
        raise InvalidRequest(str(error)) from None


@transaction.atomic
def submit(*, agent: Agent, gpu_required, config: dict | None = None) -> ScheduleRequest:
    """Queue an executor agent (its row already created, IDLE). Impossible requests are
    stored REJECTED with the reason, and their agent and run REJECTED too, so nothing waits
    forever; a run of the agent becomes QUEUED with its request (scheduler_app.queue.lifecycle)."""
    gpu_required = validate_gpu_required(gpu_required)
    config = config if config is not None else agent.config
    backend, requires = route(config)
    reason = rejection_reason(gpu_required, backend, requires)
    now = timezone.now()
    runs = Run.objects.filter(agent_id=agent.pk)
    made = list(runs.only("pk", "created_by_id", "sweep_id"))
    request = create_with_unique_id(
        ScheduleRequest,
        new_request_id,
        agent=agent,
        agent_cls_path=agent.cls_path,
        goal=agent.goal,
        parent_id=agent.parent_id,
        config=config,
        gpu_required=gpu_required,
        requires=requires,
        backend=backend,
        account=next(iter(accounts_of(made).values()), ""),  # fair share: whose it is
        status=RequestStatus.REJECTED if reason else RequestStatus.QUEUED,
        rejection_reason=reason or "",
        finished_at=now if reason else None,
    )
    if reason:
        Agent.objects.filter(pk=agent.pk).update(
            status=AgentStatus.REJECTED, error=reason, finished_at=now
        )
        runs.update(status=RunStatus.REJECTED, error=reason, finished_at=now)
    else:
        runs.update(status=RunStatus.QUEUED)
        notify_queue()
    return request


@dataclass(frozen=True)
class Claimed:
    """A request a claim placed on this host: its agent now runs on `gpu_indices`."""

    id: str
    agent_id: str
    gpu_indices: list[int]


# Its caller's transaction when called in one (runagentd's claim): no savepoint, two round
# trips fewer per claim.
@transaction.atomic(savepoint=False)
def claim(
    *,
    host_id: int,
    policy: SchedulingPolicy,
    shares: Mapping[str, float] | None = None,
    started_pid: int | None = None,
    started_classes: Collection[str] = (),
) -> list[Claimed]:
    """Start what fits on this host now; returns the requests it took, in the order the queue
    took them (scheduler_app.queue.window: fair share between accounts, `shares` by account).
    `started_pid`: the claimer runs the agents of `started_classes` in its own process (pid),
    so those are marked running here, in the same statement, not in a transaction of their
    own after it.

    Three statements whatever the queue holds: read the head of the queue (no locks; an
    empty queue ends the claim there), lock this host's free GPUs (SKIP LOCKED: another
    claimer's GPUs are simply not free to us), then one statement that locks the chosen
    requests still queued and marks them running on their GPUs. A request another host took
    or is taking is dropped there. Then, only if one was dropped while GPUs are left, two
    more: hosts claiming at once (a run's end wakes every runagentd) read the same head and
    chose the same requests, so all but one came back empty (64 hosts: 530 claims/s). Such a
    host reads the head again, locking what it reads and skipping what another has locked,
    so it chooses among requests no other host is choosing (2,500-2,800 claims/s). Locks are
    taken only then: a quiet claim hides nothing from a host claiming beside it. And, at
    most every few seconds a process, one statement before them all that sums the queue for
    fair share when no claimer has lately (scheduler_app.queue.queued_gpus)."""
    with _prepared_cursor() as cursor:
        queued_gpus.sum_if_old(cursor)  # for fair share; one statement in 5 s, a no-op mostly
        window = read_window(cursor, host_id, FIRST_WINDOW, shares)
        if not window.read:
            return []
        cursor.execute(_LOCK_FREE_GPUS, {"host": host_id}, prepare=True)
        free = [index for _, index in cursor.fetchall()]
        # A backfilling policy reads the other hosts only if a request does not fit here.
        context = ClaimContext(host_id, time.time(), lambda: online_hosts(cursor))
        chosen = _choose(cursor, window, host_id, free, shares, policy, context)
        placed = _place(cursor, host_id, chosen, started_pid, started_classes)
        if len(placed) < len(chosen):  # another host took some: choose among what it leaves
            used = {index for claimed in placed for index in claimed.gpu_indices}
            left = [index for index in free if index not in used]
            window = read_window(cursor, host_id, first_window(len(left)), shares, lock=True)
            chosen = _choose(cursor, window, host_id, left, shares, policy, context, lock=True)
            placed += _place(cursor, host_id, chosen, started_pid, started_classes)
    return placed


def _choose(cursor, window, host_id, free, shares, policy, context, *, lock=False) -> list:
    """The policy's placements on `free` from `window`, read further (CLAIM_WINDOW) only if
    it left free GPUs unused."""
    placements = policy.select(window.requests, list(free), window.host_total, context)
    if window.more and sum(len(p.gpu_indices) for p in placements) < len(free):
        window = read_window(cursor, host_id, CLAIM_WINDOW, shares, lock=lock)
        placements = policy.select(window.requests, list(free), window.host_total, context)
    return placements


def _place(cursor, host_id, placements, started_pid, started_classes) -> list[Claimed]:
    """The placements still possible made, in their order: a request another claim took or
    holds is left out, its GPUs stay free."""
    if not placements:
        return []
    cursor.execute(
        _PLACE,
        {
            "host": host_id,
            "now": timezone.now(),
            "ids": [p.request_id for p in placements],
            "gpus": ["{" + ",".join(map(str, p.gpu_indices)) + "}" for p in placements],
            "notes": [p.note for p in placements],
            "pid": started_pid,
            "local": sorted(started_classes) if started_pid else [],
        },
        prepare=True,
    )
    placed = {row[0]: Claimed(row[0], row[1], list(row[2])) for row in cursor.fetchall()}
    return [placed[p.request_id] for p in placements if p.request_id in placed]


def _prepared_cursor() -> psycopg.Cursor:
    """A cursor on Django's connection (same transaction) that binds on the server, so the
    claim's statements are planned once per connection: planning them cost more than
    running them (about 2 of a claim's 4 ms)."""
    connection.ensure_connection()
    raw = connection.connection
    # Django connects with preparing off; its own cursors bind on the client and never
    # prepare, so turning it on here changes nothing but this cursor.
    if raw.prepare_threshold is None:
        raw.prepare_threshold = 5
        # Left to choose, PostgreSQL kept re-planning the placement for each claim (a
        # custom plan per ids array) although the generic plan is the same index scans:
        # 0.5-0.9 ms of a 2-3 ms claim. Only server-bound statements have generic plans, so
        # Django's own queries are untouched. Set in the claim's transaction: if that rolls
        # back, the setting does too and claims are merely slower, never wrong.
        raw.execute("SET plan_cache_mode = force_generic_plan")
    return psycopg.Cursor(raw)


_LOCK_FREE_GPUS = """
    SELECT id, index FROM scheduler_app_gpu
    WHERE host_id = %(host)s AND enabled AND allocated_to_id IS NULL AND held_by_others = '[]'
    ORDER BY index
    FOR UPDATE SKIP LOCKED
"""

# The request, its GPUs, its agent and its run change together: the agent's config carries
# the indices it runs on, so a daemon that dies right after the claim relaunches it on them,
# and the run says `running` from the moment its request does (scheduler_app.queue.lifecycle).
_PLACE = """
    WITH wanted AS (
        SELECT unnest(%(ids)s::varchar[]) AS id,
               unnest(%(gpus)s::varchar[])::smallint[] AS gpus,
               unnest(%(notes)s::varchar[]) AS note
    ), chosen AS (
        SELECT r.id FROM scheduler_app_schedulerequest AS r
        WHERE r.id = ANY(%(ids)s::varchar[]) AND r.status = 'queued'
          AND r.agent_id IS NOT NULL  -- rechecked under the lock: its agent may just be gone
          AND NOT EXISTS (SELECT 1 FROM agents_app_agent AS child
                          JOIN agents_app_agent AS parent ON parent.id = child.parent_id
                          WHERE child.id = r.agent_id AND parent.status = 'paused')
        FOR UPDATE SKIP LOCKED
    ), placed AS (
        UPDATE scheduler_app_schedulerequest AS r
        SET status = 'running', host_id = %(host)s, started_at = %(now)s,
            gpu_indices = wanted.gpus, placement_note = wanted.note
        FROM wanted JOIN chosen ON chosen.id = wanted.id
        WHERE r.id = wanted.id
        RETURNING r.id, r.agent_id, r.gpu_indices
    ), booked AS (
        UPDATE scheduler_app_gpu AS g
        SET allocated_to_id = placed.id, allocated_at = %(now)s
        FROM placed, unnest(placed.gpu_indices) AS taken(index)
        WHERE g.host_id = %(host)s AND g.index = taken.index AND g.allocated_to_id IS NULL
    ), moved AS (
        UPDATE agents_app_agent AS a
        SET host_id = %(host)s,
            config = a.config || jsonb_build_object(
                'gpu_indices', to_jsonb(placed.gpu_indices), 'request_id', placed.id),
            status = CASE WHEN a.cls_path = ANY(%(local)s::varchar[]) THEN 'running'
                          ELSE a.status END,
            pid = CASE WHEN a.cls_path = ANY(%(local)s::varchar[]) THEN %(pid)s::integer
                       ELSE a.pid END,
            started_at = CASE WHEN a.cls_path = ANY(%(local)s::varchar[])
                              THEN COALESCE(a.started_at, %(now)s) ELSE a.started_at END,
            updated_at = %(now)s
        FROM placed
        WHERE a.id = placed.agent_id
    ), run_started AS (
        UPDATE scheduler_app_run AS run
        SET status = 'running', started_at = COALESCE(run.started_at, %(now)s),
            updated_at = %(now)s
        FROM placed
        WHERE run.agent_id = placed.agent_id AND run.status = 'queued'
    )
    SELECT id, agent_id, gpu_indices FROM placed
"""


# Its caller's transaction when called in one (runagentd's claim): no savepoint, two round
# trips fewer per claim.
@transaction.atomic(savepoint=False)
def claim_slurm(*, host_id: int, limit: int) -> list[Claimed]:
    """Take up to `limit` queued SLURM requests, oldest first, for this host's runagentd to
    submit. No GPU of ours is booked (SLURM places the job), and the run stays `queued`
    until SLURM starts the job (its executor says so, with SLURM's reason meanwhile)."""
    if limit <= 0:
        return []
    with connection.cursor() as cursor:
        cursor.execute(_CLAIM_SLURM, {"host": host_id, "now": timezone.now(), "limit": limit})
        rows = cursor.fetchall()
    return [Claimed(request_id, agent_id, []) for _, request_id, agent_id in sorted(rows)]


_CLAIM_SLURM = """
    WITH chosen AS (
        SELECT id FROM scheduler_app_schedulerequest AS r
        WHERE status = 'queued' AND backend = 'slurm' AND agent_id IS NOT NULL
          AND NOT EXISTS (SELECT 1 FROM agents_app_agent AS child
                          JOIN agents_app_agent AS parent ON parent.id = child.parent_id
                          WHERE child.id = r.agent_id AND parent.status = 'paused')
        ORDER BY created_at, id
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED
    ), placed AS (
        UPDATE scheduler_app_schedulerequest AS r
        SET status = 'running', host_id = %(host)s, started_at = %(now)s, gpu_indices = '{}'
        FROM chosen WHERE r.id = chosen.id
        RETURNING r.created_at, r.id, r.agent_id
    ), moved AS (
        UPDATE agents_app_agent AS a
        SET host_id = %(host)s,
            config = a.config || jsonb_build_object('gpu_indices', '[]'::jsonb,
                                                    'request_id', placed.id)
        FROM placed WHERE a.id = placed.agent_id
    )
    SELECT created_at, id, agent_id FROM placed
"""
