"""Reads for the GPU queue page and the overview: each host's GPUs with what holds them, and
the queue in claim order with each request's wait and the reason it waits."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from agentsys.scheduling import HostCapacity, QueuedRequest, waiting_reasons
from agentsys.types import RequestStatus
from hosts_app.models import Host
from scheduler_app.models import Run, RunStatus, ScheduleRequest
from scheduler_app.queue import SLURM
from scheduler_app.selectors import host_is_alive, hosts_with_gpus

QUEUE_SHOWN = 200  # the page lists this many; the count says how many more wait


@dataclass
class QueueRow:
    position: int
    request: ScheduleRequest
    run: Run | None
    waited: timedelta
    reason: str


@dataclass
class HostRow:
    host: Host
    alive: bool
    gpus: list = field(default_factory=list)  # GPU rows, each with .holder (Run or None)
    free: int = 0


def _runs_of(requests: list[ScheduleRequest]) -> dict[str, Run]:
    agent_ids = [r.agent_id for r in requests if r.agent_id]
    return {run.agent_id: run for run in Run.objects.filter(agent_id__in=agent_ids)}


def host_rows(*, now=None) -> list[HostRow]:
    """Every host with its GPUs; each GPU names the run (or request) holding it."""
    now = now or timezone.now()
    hosts = list(hosts_with_gpus())
    holders = {
        r.pk: r for r in ScheduleRequest.objects.filter(allocated_gpus__host__in=hosts).distinct()
    }
    runs = _runs_of(list(holders.values()))
    rows = []
    for host in hosts:
        row = HostRow(host=host, alive=host_is_alive(host, now=now))
        for gpu in host.gpus.all():
            request = holders.get(gpu.allocated_to_id)
            gpu.holder_request = request
            gpu.holder_run = runs.get(request.agent_id) if request else None
            if gpu.enabled and request is None and not gpu.held_by_others:
                row.free += 1
            row.gpus.append(gpu)
        rows.append(row)
    return rows


def queue_rows(hosts: list[HostRow], *, limit: int = QUEUE_SHOWN, now=None) -> list[QueueRow]:
    now = now or timezone.now()
    queued = list(
        ScheduleRequest.objects.filter(status=RequestStatus.QUEUED).order_by("created_at", "id")[
            :limit
        ]
    )
    capacity = [
        HostCapacity(
            name=h.host.name,
            alive=h.alive,
            total=sum(1 for g in h.gpus if g.enabled),
            free=h.free,
            labels=h.host.labels or {},
        )
        for h in hosts
    ]
    reasons = waiting_reasons(
        [QueuedRequest(r.pk, r.gpu_required, r.requires or {}) for r in queued],
        capacity,
        settings.AGENTSYS.scheduler_policy,
    )
    runs = _runs_of(queued)
    return [
        QueueRow(
            position=n,
            request=r,
            run=runs.get(r.agent_id),
            waited=now - r.created_at,
            reason=reasons[r.pk],
        )
        for n, r in enumerate(queued, 1)
    ]


def in_slurm_queue():
    """Runs a runagentd handed to SLURM whose job SLURM has not started: they wait in SLURM's
    queue (with its reason), not in ours."""
    return Run.objects.filter(
        status=RunStatus.QUEUED,
        agent__schedule_request__backend=SLURM,
        agent__schedule_request__status=RequestStatus.RUNNING,
    )


def queue_board() -> dict:
    now = timezone.now()
    hosts = host_rows(now=now)
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
    queue = queue_rows(hosts, now=now)
    return {
        "hosts": hosts,
        "queue": queue,
        "slurm_waiting": slurm_waiting,
        "shown": len(queue) + len(slurm_waiting),
        "queued_total": queued_total + in_slurm_queue().count(),
        "running": running,
        "policy": settings.AGENTSYS.scheduler_policy,
    }
