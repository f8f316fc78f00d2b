"""Whether a host is alive: online and heart-beating lately. Read by the hosts board, the
admin, the health check and `manage.py runs`; it needs only the Host row, so it lives with it."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from hosts_app.models import Host, HostStatus

# A host that has not heart-beaten for this long is shown (and later declared) dead.
HEARTBEAT_STALE_AFTER = timedelta(seconds=30)


def host_is_alive(host: Host, *, now=None) -> bool:
    now = now or timezone.now()
    return (
        host.status == HostStatus.ONLINE
        and host.last_heartbeat is not None
        and now - host.last_heartbeat < HEARTBEAT_STALE_AFTER
    )
