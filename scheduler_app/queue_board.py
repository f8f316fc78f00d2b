"""Reads for the GPU queue page and the overview: the host cards (scheduler_app.hosts.board)
and the queue in claim order with each request's wait and the reason it waits."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import psycopg
from django.conf import settings
from django.db import connection
from django.utils import timezone

from agentsys.fair_share import parts
from agentsys.stop_rules import time_limit
from agentsys.types import RequestStatus
from scheduler_app.hosts.board import HostCard, host_cards
from scheduler_app.models import Run, RunStatus, ScheduleRequest
from scheduler_app.queue.backfill_reasons import BackfillReasons
from scheduler_app.queue.claims import SLURM
from scheduler_app.queue.cluster import online_hosts
from scheduler_app.queue.wait_reasons import goes_first, wait_reason
from scheduler_app.queue.window import Window, read_window

QUEUE_SHOWN = 200  # the page lists this many; the count says how many more wait


@dataclass
class QueueRow:
    position: int
    request: ScheduleRequest
    run: Run | None
    waited: timedelta
    reason: str


def _runs_of(requests: list[ScheduleRequest]) -> dict[str, Run]:
    agent_ids = [r.agent_id for r in requests if r.agent_id]
    return {run.agent_id: run for run in Run.objects.filter(agent_id__in=agent_ids)}


@dataclass
class PersonTurn:
    """A person's place in fair share's turns (agentsys.fair_share), as the queue page says it."""

    account: str  # "" for runs no person made
    in_use: int  # GPUs
    asked: int  # GPUs in use and queued
    percent: int  # their part of the GPUs while everyone listed waits


def _window(limit: int) -> Window:
    connection.ensure_connection()  # the claim's own statement, on a cursor that can run it
    with psycopg.Cursor(connection.connection) as cursor:
        return read_window(cursor, None, limit, settings.AGENTSYS.queue_shares)


def turns_between_people(window: Window) -> list[PersonTurn]:
    """Each person with runs queued in `window`, the largest part first; none when one
    person waits."""
    asks = window.asks
    if len(asks) < 2:
        return []
    part = parts(
        {account: asked for account, (_, asked) in asks.items()}, settings.AGENTSYS.queue_shares
    )
    turns = [
        PersonTurn(account, in_use, asked, round(100 * part[account]))
        for account, (in_use, asked) in asks.items()
    ]
    return sorted(turns, key=lambda turn: (-turn.percent, turn.account))


def queued_in_turn(limit: int, window: Window | None = None) -> list[ScheduleRequest]:
    """The queued requests in the order claims take them (fair share between people), then
    those no claim takes now (held by a paused loop), oldest first. `window`: the claims'
    window of `limit` requests, when the caller has read it already."""
    window = window if window is not None else _window(limit)
    ids = [request.id for request in window.requests]
    queued = ScheduleRequest.objects.filter(status=RequestStatus.QUEUED)
    rows = queued.in_bulk(ids)
    in_turn = [rows[pk] for pk in ids if pk in rows]
    rest = queued.exclude(pk__in=ids).order_by("created_at", "id")[: limit - len(in_turn)]
    return in_turn + list(rest)


def queue_rows(
    hosts: list[HostCard], *, limit: int = QUEUE_SHOWN, now=None, window: Window | None = None
) -> list[QueueRow]:
    """The head of the queue in claim order, each with why it waits. Its place in line
    counts only the requests before it that the policy places first (wait_reasons.goes_first):
    one needing no GPU, going to SLURM or (under fifo) not fitting now takes nothing from it."""
    now = now or timezone.now()
    queued = queued_in_turn(limit, window)
    runs = _runs_of(queued)
    policy = settings.AGENTSYS.scheduler_policy
    backfill = BackfillReasons(online_hosts(), now.timestamp()) if policy == "backfill" else None
    rows, ahead = [], 0
    for n, request in enumerate(queued, 1):
        reason = wait_reason(request, hosts, ahead=ahead)
        if backfill is not None:
            reason = backfill.reason(request, reason)
        ahead += goes_first(request, hosts, policy=policy)
        rows.append(
            QueueRow(
                position=n,
                request=request,
                run=runs.get(request.agent_id),
                waited=now - request.created_at,
                reason=reason,
            )
        )
    return rows


def in_slurm_queue():
    """Runs a runagentd handed to SLURM whose job SLURM has not started: they wait in SLURM's
    queue (with its reason), not in ours."""
    return Run.objects.filter(
        status=RunStatus.QUEUED,
        agent__schedule_request__backend=SLURM,
        agent__schedule_request__status=RequestStatus.RUNNING,
    )


def _ends_at(request: ScheduleRequest):
    """When its time limit (its wall_seconds stop rule) ends it, or None."""
    config = request.config if isinstance(request.config, dict) else {}
    limit = time_limit(config.get("stop_when"))
    if limit is None or request.started_at is None:
        return None
    return request.started_at + timedelta(seconds=limit)


def queue_board() -> dict:
    now = timezone.now()
    hosts = host_cards(now=now)
    slurm_waiting = list(in_slurm_queue().order_by("created_at", "id")[:QUEUE_SHOWN])
    for run in slurm_waiting:
        run.waited = now - run.created_at
    queued_total = ScheduleRequest.objects.filter(status=RequestStatus.QUEUED).count()
    running = list(
        ScheduleRequest.objects.filter(status=RequestStatus.RUNNING)
        .exclude(agent__runs__in=[run.pk for run in slurm_waiting])
        .select_related("host")
        .order_by("started_at", "id")[:QUEUE_SHOWN]
    )
    runs = _runs_of(running)
    for request in running:
        request.run = runs.get(request.agent_id)
        request.ran_for = now - request.started_at if request.started_at else None
        request.ends_at = _ends_at(request)
    window = _window(QUEUE_SHOWN)  # one read for the rows and the turns between people
    queue = queue_rows(hosts, now=now, window=window)
    return {
        "hosts": hosts,
        "queue": queue,
        "slurm_waiting": slurm_waiting,
        "shown": len(queue) + len(slurm_waiting),
        "queued_total": queued_total + in_slurm_queue().count(),
        "running": running,
        "policy": settings.AGENTSYS.scheduler_policy,
        "turns": turns_between_people(window),
    }
