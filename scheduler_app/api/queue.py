"""REST for hosts, GPUs, the executor queue and its statistics."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from ninja import Field, Query, Router, Schema, Status

from agentsys.types import END_STATE_HELP, RequestStatus
from common.api_contract import MAX_OFFSET
from scheduler_app import selectors, services
from scheduler_app.hosts.board import GPU_LESS_SHOWN, HostCard, host_cards
from scheduler_app.models import ScheduleRequest
from scheduler_app.queue_board import QUEUE_SHOWN, queue_rows

router = Router()


class GPUOut(Schema):
    index: int
    name: str
    uuid: str
    memory_total_mb: int | None
    source: str
    enabled: bool
    allocated_to: str | None = Field(description="The schedule request holding it")
    held_by_others: list[dict[str, Any]]  # foreign processes: {pid, name, used_mb}
    state: str = Field(
        description="busy (a run of ours), foreign (held by others), off (disabled) or free"
    )
    run_id: str | None = Field(description="The run holding it, when its request has one")
    run_name: str
    holder: str = Field(
        description='What holds it in words: the run, "held by others: …", "disabled" or "free"'
    )


class RunRefOut(Schema):
    id: str
    name: str


class HostOut(Schema):
    name: str
    hostname: str
    status: str
    state: str = Field(
        description="online, silent (online but no heartbeat for 30 s), offline or dead"
    )
    alive: bool
    last_heartbeat: datetime | None
    heartbeat_age_s: float | None
    daemon_pid: int | None
    labels: dict[str, Any] = Field(
        description="What runs may require of it (a run's `requires`): AGENTSYS_HOST_LABELS "
        "over its GPUs' gpu_model and gpu_memory_gb"
    )
    gpu_total: int = Field(description="GPUs offered to the queue (enabled)")
    gpu_free: int = Field(description="Enabled, not booked, not held by others")
    gpus: list[GPUOut]
    gpu_less_runs: list[RunRefOut] = Field(
        description=f"Runs placed on it that use no GPU (the first {GPU_LESS_SHOWN})"
    )
    gpu_less_total: int


@router.get(
    "/hosts",
    response=list[HostOut],
    summary="GPU hosts (online first), their GPUs and what holds each",
)
def list_hosts(request):
    return [_host_out(card) for card in host_cards()]


def _host_out(card: HostCard) -> HostOut:
    host = card.host
    return HostOut(
        name=host.name,
        hostname=host.hostname,
        status=host.status,
        state=card.state,
        alive=card.alive,
        last_heartbeat=host.last_heartbeat,
        heartbeat_age_s=(
            None if card.heartbeat_age is None else card.heartbeat_age.total_seconds()
        ),
        daemon_pid=host.daemon_pid,
        labels=card.labels,
        gpu_total=card.total,
        gpu_free=card.free,
        gpus=[
            GPUOut(
                index=gpu.index,
                name=gpu.name,
                uuid=gpu.uuid,
                memory_total_mb=gpu.memory_total_mb,
                source=gpu.source,
                enabled=gpu.enabled,
                allocated_to=gpu.request_id,
                held_by_others=gpu.held_by_others,
                state=gpu.state,
                run_id=gpu.run_id,
                run_name=gpu.run_name,
                holder=gpu.holder,
            )
            for gpu in card.gpus
        ],
        gpu_less_runs=[RunRefOut(**run) for run in card.gpu_less_runs],
        gpu_less_total=card.gpu_less_total,
    )


# -- the executor queue -------------------------------------------------------------------------


class ErrorOut(Schema):
    detail: str


class RequestOut(Schema):
    id: str
    status: RequestStatus = Field(
        description=f"queued, running (on gpu_indices of host), then as its run. {END_STATE_HELP}"
    )
    agent_id: str | None
    parent_id: str | None
    agent_cls_path: str
    goal: str
    gpu_required: int
    gpu_indices: list[int]
    host: str | None
    rejection_reason: str
    account: str = Field(
        description="Whose it is for fair share: the username of the person who made its run "
        "or the run's sweep; empty for a run no person made"
    )
    placement_note: str = Field(
        description="Why it started ahead of an older request (backfill), e.g. 'backfilled: "
        "ends before gpu-c frees 8 GPUs at 14:05 UTC'"
    )
    config: dict[str, Any]
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None

    @staticmethod
    def resolve_host(obj):
        return obj.host.name if obj.host_id else None


class RequestPage(Schema):
    count: int
    items: list[RequestOut]


@router.get(
    "/scheduler/queue",
    response={200: RequestPage, 400: ErrorOut},
    summary="Schedule requests, oldest first; filter by parent_id and status",
    tags=["scheduler"],
)
def list_requests(
    request,
    parent_id: str | None = Query(None, max_length=64),
    status: str | None = Query(None, max_length=20),
    limit: int = Query(50, ge=1, le=500),
    offset: int = Query(0, ge=0, le=MAX_OFFSET),
):
    requests = ScheduleRequest.objects.select_related("host").order_by("created_at", "id")
    if status:
        if status not in set(RequestStatus):
            allowed = ", ".join(RequestStatus)
            return Status(400, {"detail": f"status must be one of {allowed}; got {status!r}"})
        requests = requests.filter(status=status)
    if parent_id:
        requests = requests.filter(parent_id=parent_id)
    return {"count": requests.count(), "items": list(requests[offset : offset + limit])}


class WaitingOut(Schema):
    position: int = Field(description="1 = the next a claim takes, in fair-share turns")
    request_id: str
    run_id: str | None
    name: str = Field(description="Its run's name, else the request's goal")
    account: str
    gpu_required: int
    waited_s: float
    reason: str = Field(
        description="Why it waits, as the queue page says it: 'No host with 2 free GPUs; ... "
        "kept for it: gpu-c frees 2 GPUs at 14:05 UTC', 'Would delay the reservation (...)'"
    )


@router.get(
    "/scheduler/waiting",
    response=list[WaitingOut],
    summary="The queued requests in the order claims take them, each with why it waits",
    tags=["scheduler"],
)
def list_waiting(request, limit: int = Query(50, ge=1, le=QUEUE_SHOWN)):
    return [
        WaitingOut(
            position=row.position,
            request_id=row.request.pk,
            run_id=row.run.pk if row.run else None,
            name=row.run.name if row.run else row.request.goal,
            account=row.request.account,
            gpu_required=row.request.gpu_required,
            waited_s=round(row.waited.total_seconds(), 3),
            reason=row.reason,
        )
        for row in queue_rows(host_cards(), limit=limit)
    ]


@router.get(
    "/scheduler/queue/{request_id}",
    response={200: RequestOut, 404: ErrorOut},
    summary="One schedule request",
    tags=["scheduler"],
)
def get_request(request, request_id: str):
    found = ScheduleRequest.objects.select_related("host").filter(pk=request_id).first()
    if found is None:
        return Status(404, {"detail": f"no schedule request {request_id!r}"})
    return found


@router.post(
    "/scheduler/queue/{request_id}/cancel",
    response={200: RequestOut, 404: ErrorOut, 409: ErrorOut},
    summary="Cancel a queued request (status becomes cancelled)",
    tags=["scheduler"],
)
def cancel_request(request, request_id: str):
    if not ScheduleRequest.objects.filter(pk=request_id).exists():
        return Status(404, {"detail": f"no schedule request {request_id!r}"})
    try:
        with transaction.atomic():
            return services.cancel_request(request_id=request_id)
    except services.ServiceError as error:
        return Status(409, {"detail": str(error)})


@router.get(
    "/scheduler/stats", summary="GPU use and the queue, in total and per host", tags=["scheduler"]
)
def scheduler_stats(request):
    return selectors.queue_stats_per_host()
