"""Django's own Host check (HttpRequest.get_host), for the paths served before Django: /mcp
(mcp_app.http_endpoint) and POST /api/runs/wait (scheduler_app.api.run_wait)."""

from __future__ import annotations

from django.conf import settings
from django.http.request import split_domain_port, validate_host


def host_allowed(host: str) -> bool:
    allowed = settings.ALLOWED_HOSTS
    if settings.DEBUG and not allowed:
        allowed = [".localhost", "127.0.0.1", "[::1]"]
    domain, _port = split_domain_port(host)
    return bool(domain) and validate_host(domain, allowed)
