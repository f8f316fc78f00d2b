"""The Django side of agentsys.daemon.DaemonStore: thin calls into the services."""

from __future__ import annotations

from django.db import connections

from scheduler_app import services


class DjangoDaemonStore:
    def register_host(self, *, name: str, pid: int, declared_gpus: list[int] | None) -> int:
        return services.register_host(name=name, pid=pid, declared_gpus=declared_gpus).pk

    def record_heartbeat(self, *, host_id: int) -> None:
        services.record_heartbeat(host_id=host_id)

    def mark_host_offline(self, *, host_id: int) -> None:
        services.mark_host_offline(host_id=host_id)

    def close(self) -> None:
        connections.close_all()
