"""Reads for hosts, GPUs, the queue and runs."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Prefetch, QuerySet
from django.utils import timezone

from scheduler_app.models import GPU, Host, HostStatus

# A host that has not heart-beaten for this long is shown (and later declared) dead.
HEARTBEAT_STALE_AFTER = timedelta(seconds=30)


def hosts_with_gpus() -> QuerySet[Host]:
    return Host.objects.prefetch_related(
        Prefetch("gpus", queryset=GPU.objects.order_by("index"))
    ).order_by("name")


def host_is_alive(host: Host, *, now=None) -> bool:
    now = now or timezone.now()
    return (
        host.status == HostStatus.ONLINE
        and host.last_heartbeat is not None
        and now - host.last_heartbeat < HEARTBEAT_STALE_AFTER
    )
