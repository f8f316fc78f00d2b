"""ASGI entry point for daphne: HTTP through Django (but /mcp: AgentSys as an MCP server over
streamable HTTP, mcp_app.http_endpoint; and POST /api/runs/wait, a wait on runs that holds no
thread, scheduler_app.api.run_wait), WebSockets through Channels."""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "researchagent.settings")
django.setup(set_prefix=False)  # as get_asgi_application does

from researchagent.asgi_handler import SyncChainASGIHandler  # noqa: E402

django_asgi_app = SyncChainASGIHandler()

from channels.auth import AuthMiddlewareStack  # noqa: E402  (needs the app registry ready)
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.urls import get_resolver  # noqa: E402

from mcp_app.http_endpoint import with_mcp  # noqa: E402
from researchagent.routing import websocket_urlpatterns  # noqa: E402
from scheduler_app.api.run_wait import with_run_waits  # noqa: E402

# Django imports the URLconf (every app's views and the API's schemas: 0.6-0.8 s on a quiet
# 2-core machine, 2 s on a busy one) on the first request it resolves. Done here, before the
# port is open, so that the first request after a start or a restart (a health probe, a
# person's page) is answered as fast as the rest.
_url_patterns = get_resolver().url_patterns

application = ProtocolTypeRouter(
    {
        "http": with_mcp(with_run_waits(django_asgi_app)),
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)
