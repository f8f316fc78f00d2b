"""REST for hosts and GPUs. (The queue, runs and alerts routes come with the scheduler.)"""

from __future__ import annotations

from datetime import datetime

from ninja import Router, Schema

from scheduler_app import selectors

router = Router()


class GPUOut(Schema):
    index: int
    name: str
    uuid: str
    memory_total_mb: int | None
    source: str
    enabled: bool
    allocated_to: str | None


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
                )
                for gpu in host.gpus.all()
            ],
        )
        for host in selectors.hosts_with_gpus()
    ]
