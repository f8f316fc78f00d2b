"""The executor queue on PostgreSQL: submit, claim (row locks, SKIP LOCKED), release, cancel.

Every GPU row names the one request holding it, so a GPU can never be given twice; claims
lock the host's free GPU rows and the queued requests they consider. A NOTIFY on
`agentsys_queue` (sent at commit) wakes every daemon when work arrives or GPUs free up.
"""

from __future__ import annotations

from django.db import connection, transaction
from django.db.models import Count, Max, Q
from django.utils import timezone

from agents_app.models import Agent
from agentsys.scheduling import Placement, QueuedRequest, SchedulingPolicy
from agentsys.types import AgentStatus, RequestStatus
from scheduler_app.models import GPU, Host, HostStatus, ScheduleRequest

QUEUE_CHANNEL = "agentsys_queue"
CLAIM_WINDOW = 500  # queued requests a claim looks at, oldest first


class InvalidRequest(ValueError):
    """A submission that can never be valid (bad gpu_required): the caller's mistake."""


def notify_queue() -> None:
    with connection.cursor() as cursor:  # delivered at commit
        cursor.execute("SELECT pg_notify(%s, '')", [QUEUE_CHANNEL])


def validate_gpu_required(value) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidRequest(f"gpu_required must be a whole number ≥ 0, got {value!r}")
    if value < 0:
        raise InvalidRequest(f"gpu_required must be ≥ 0, got {value}")
    return value


def rejection_reason(gpu_required: int) -> str | None:
    """Why a request can never run here, or None. Hosts marked dead do not count."""
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


@transaction.atomic
def submit(*, agent: Agent, gpu_required, config: dict | None = None) -> ScheduleRequest:
    """Queue an executor agent (its row already created, IDLE). Impossible requests are
    stored REJECTED with the reason, and their agent FAILED, so nothing waits forever."""
    gpu_required = validate_gpu_required(gpu_required)
    reason = rejection_reason(gpu_required)
    request = ScheduleRequest.objects.create(
        agent=agent,
        agent_cls_path=agent.cls_path,
        goal=agent.goal,
        parent_id=agent.parent_id,
        config=config if config is not None else agent.config,
        gpu_required=gpu_required,
        status=RequestStatus.REJECTED if reason else RequestStatus.QUEUED,
        rejection_reason=reason or "",
        finished_at=timezone.now() if reason else None,
    )
    if reason:
        Agent.objects.filter(pk=agent.pk).update(
            status=AgentStatus.FAILED, error=reason, finished_at=timezone.now()
        )
    else:
        notify_queue()
    return request


@transaction.atomic
def claim(*, host_id: int, policy: SchedulingPolicy) -> list[ScheduleRequest]:
    """Start what fits on this host now; returns the requests it took, GPUs assigned."""
    free_gpus = list(
        GPU.objects.select_for_update(skip_locked=True)
        .filter(host_id=host_id, enabled=True, allocated_to__isnull=True)
        .order_by("index")
    )
    host_total = GPU.objects.filter(host_id=host_id, enabled=True).count()
    queued = list(
        ScheduleRequest.objects.select_for_update(skip_locked=True)
        .filter(status=RequestStatus.QUEUED)
        .order_by("created_at", "id")[:CLAIM_WINDOW]
    )
    if not queued:
        return []
    placements = policy.select(
        [QueuedRequest(r.id, r.gpu_required) for r in queued],
        [g.index for g in free_gpus],
        host_total,
    )
    by_id = {r.id: r for r in queued}
    gpu_by_index = {g.index: g for g in free_gpus}
    return [_place(by_id[p.request_id], p, gpu_by_index, host_id) for p in placements]


def _place(request: ScheduleRequest, placement: Placement, gpus: dict, host_id: int):
    now = timezone.now()
    request.status, request.host_id = RequestStatus.RUNNING, host_id
    request.gpu_indices, request.started_at = list(placement.gpu_indices), now
    request.save(update_fields=["status", "host", "gpu_indices", "started_at"])
    for index in placement.gpu_indices:
        gpu = gpus[index]
        gpu.allocated_to, gpu.allocated_at = request, now
        gpu.save(update_fields=["allocated_to", "allocated_at"])
    Agent.objects.filter(pk=request.agent_id).update(host_id=host_id)
    return request


_FINAL_FOR_AGENT = {
    AgentStatus.DONE: RequestStatus.DONE,
    AgentStatus.FAILED: RequestStatus.FAILED,
    AgentStatus.STOPPED: RequestStatus.CANCELLED,
}


def release_for_agent(*, agent_id: str, agent_status: AgentStatus) -> bool:
    """The executor finished: free its GPUs and close its request (inside the caller's
    transaction, with the agent's own status change)."""
    request = (
        ScheduleRequest.objects.select_for_update()
        .filter(agent_id=agent_id, status__in=[RequestStatus.RUNNING, RequestStatus.QUEUED])
        .first()
    )
    if request is None:
        return False
    GPU.objects.filter(allocated_to=request).update(allocated_to=None, allocated_at=None)
    request.status = _FINAL_FOR_AGENT.get(agent_status, RequestStatus.FAILED)
    request.finished_at = timezone.now()
    request.save(update_fields=["status", "finished_at"])
    notify_queue()
    return True


def stats(*, host_id: int | None = None) -> dict:
    """The design doc's keys, for one host or (host_id None) all of them."""
    gpus = GPU.objects.filter(enabled=True)
    requests = ScheduleRequest.objects.all()
    if host_id is not None:
        gpus = gpus.filter(host_id=host_id)
        requests = requests.filter(Q(host_id=host_id) | Q(status=RequestStatus.QUEUED))
    total = gpus.count()
    allocated = gpus.filter(allocated_to__isnull=False).count()
    by_status = dict(requests.order_by().values_list("status").annotate(n=Count("id")))
    return {
        "gpu_total": total,
        "gpu_allocated": allocated,
        "gpu_available": total - allocated,
        "queue_size": by_status.get(RequestStatus.QUEUED, 0),
        "running": by_status.get(RequestStatus.RUNNING, 0),
        "total_requests": sum(by_status.values()),
        "by_status": {str(s): by_status.get(s, 0) for s in RequestStatus},
    }


def stats_per_host() -> dict:
    hosts = {h.name: stats(host_id=h.pk) for h in Host.objects.order_by("name")}
    return {"total": stats(), "hosts": hosts}
