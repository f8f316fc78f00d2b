"""REST for hosts, GPUs, the executor queue and its statistics."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from ninja import Field, Query, Router, Schema, Status

from agentsys.types import END_STATE_HELP, RequestStatus
from common.api_contract import MAX_OFFSET
from scheduler_app import queue as queue_service
from scheduler_app import selectors, services
from scheduler_app.models import ScheduleRequest

router = Router()


class GPUOut(Schema):
    index: int
    name: str
    uuid: str
    memory_total_mb: int | None
    source: str
    enabled: bool
    allocated_to: str | None
    held_by_others: list[dict[str, Any]]  # foreign processes: {pid, name, used_mb}


class HostOut(Schema):
    name: str
    hostname: str
    status: str
    alive: bool
    last_heartbeat: datetime | None
    daemon_pid: int | None
    gpus: list[GPUOut]


@router.get("/hosts", response=list[HostOut], summary="GPU hosts and their GPUs")
def list_hosts(request):
    return [
        HostOut(
            name=host.name,
            hostname=host.hostname,
            status=host.status,
            alive=selectors.host_is_alive(host),
            last_heartbeat=host.last_heartbeat,
            daemon_pid=host.daemon_pid,
            gpus=[
                GPUOut(
                    index=gpu.index,
                    name=gpu.name,
                    uuid=gpu.uuid,
                    memory_total_mb=gpu.memory_total_mb,
                    source=gpu.source,
                    enabled=gpu.enabled,
                    allocated_to=gpu.allocated_to_id,
                    held_by_others=gpu.held_by_others,
                )
                for gpu in host.gpus.all()
            ],
        )
        for host in selectors.hosts_with_gpus()
    ]


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
    return queue_service.stats_per_host()
