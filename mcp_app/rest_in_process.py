"""AgentSys's REST API in this process, for the MCP tools of `manage.py mcp` and of /mcp: an
HTTP client that calls the ASGI app directly (no network, no web server needed)."""

from __future__ import annotations

import httpx
from django.conf import settings


def in_process_rest(app) -> httpx.AsyncClient:
    """An HTTP client for AgentSys's REST API served by `app` in this process (no network),
    addressed with a host and scheme the app accepts."""
    scheme = "https" if settings.SECURE_SSL_REDIRECT else "http"
    host = next(
        (h for h in settings.ALLOWED_HOSTS if h != "*" and not h.startswith(".")), "localhost"
    )
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url=f"{scheme}://{host}", timeout=30.0
    )
