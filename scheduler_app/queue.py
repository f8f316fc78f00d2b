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
from researchagent.ids import create_with_unique_id
from scheduler_app.models import GPU, Host, HostStatus, ScheduleRequest, new_request_id

QUEUE_CHANNEL = "agentsys_queue"
FIRST_WINDOW = 64  # queued requests a claim reads first, oldest first...
CLAIM_WINDOW = 500  # ...and at most, when the first window leaves GPUs idle


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
    request = create_with_unique_id(
        ScheduleRequest,
        new_request_id,
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
    """Start what fits on this host now; returns the requests it took, GPUs assigned.

    The window of the queue is read without locks and the policy decides on it; then only
    the chosen requests are locked (SKIP LOCKED, still queued). One another daemon took in
    the meantime is simply dropped: its GPUs stay free for the next round. Locking the
    whole window instead costs a row lock per queued request on every claim."""
    free_gpus = list(
        GPU.objects.select_for_update(skip_locked=True)
        .filter(host_id=host_id, enabled=True, allocated_to__isnull=True)
        .order_by("index")
    )
    host_total = GPU.objects.filter(host_id=host_id, enabled=True).count()
    placements: list[Placement] = []
    for size in (FIRST_WINDOW, CLAIM_WINDOW):
        window = _queue_window(size)
        placements = policy.select(window, [g.index for g in free_gpus], host_total)
        used = sum(len(p.gpu_indices) for p in placements)
        # Look further down the queue only if this window left free GPUs unused.
        if len(window) < size or used == len(free_gpus):
            break
    if not placements:
        return []
    chosen = set(
        ScheduleRequest.objects.select_for_update(skip_locked=True)
        .filter(pk__in=[p.request_id for p in placements], status=RequestStatus.QUEUED)
        .values_list("id", flat=True)
    )
    placements = [p for p in placements if p.request_id in chosen]
    if placements:
        _place(placements, {g.index: g.pk for g in free_gpus}, host_id)
    return list(
        ScheduleRequest.objects.filter(pk__in=[p.request_id for p in placements]).order_by(
            "created_at", "id"
        )
    )


def _queue_window(size: int) -> list[QueuedRequest]:
    rows = (
        ScheduleRequest.objects.filter(status=RequestStatus.QUEUED)
        .order_by("created_at", "id")
        .values_list("id", "gpu_required")[:size]
    )
    return [QueuedRequest(request_id, gpus) for request_id, gpus in rows]


def _place(placements: list[Placement], gpu_ids: dict[int, int], host_id: int) -> None:
    """Mark the placed requests running on their GPUs: one statement per table, whatever
    the number of placements (a claim is a handful of round trips, not three per request)."""
    now = timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(
            """
            UPDATE scheduler_app_schedulerequest AS r
            SET status = 'running', host_id = %s, started_at = %s, gpu_indices = v.gpus
            FROM (SELECT unnest(%s::varchar[]) AS id,
                         unnest(%s::varchar[])::smallint[] AS gpus) AS v
            WHERE r.id = v.id
            """,
            [
                host_id,
                now,
                [p.request_id for p in placements],
                ["{" + ",".join(map(str, p.gpu_indices)) + "}" for p in placements],
            ],
        )
        pairs = [(gpu_ids[i], p.request_id) for p in placements for i in p.gpu_indices]
        if pairs:
            cursor.execute(
                """
                UPDATE scheduler_app_gpu AS g SET allocated_to_id = v.request, allocated_at = %s
                FROM (SELECT unnest(%s::bigint[]) AS id, unnest(%s::varchar[]) AS request) AS v
                WHERE g.id = v.id
                """,
                [now, [gpu for gpu, _ in pairs], [request for _, request in pairs]],
            )
        cursor.execute(
            """
            UPDATE agents_app_agent SET host_id = %s WHERE id IN (
                SELECT agent_id FROM scheduler_app_schedulerequest WHERE id = ANY(%s))
            """,
            [host_id, [p.request_id for p in placements]],
        )


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
