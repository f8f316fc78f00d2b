"""The REST API: one NinjaAPI, one router per app, every route behind API_AUTH."""

from django.contrib.auth.decorators import login_required
from ninja import NinjaAPI

from agents_app.api import router as agents_router
from memory_app.api import router as memory_router
from researchagent.auth import API_AUTH
from researchagent.health import router as health_router
from scheduler_app.api import router as scheduler_router
from scheduler_app.api_runs import router as runs_router
from sessions_app.api import router as sessions_router

api = NinjaAPI(
    title="AgentSys API",
    version="1",
    description="Chat sessions, agents, the GPU queue, runs and memory. Authenticate with a "
    "logged-in session (plus CSRF token) or the API token in `X-Auth-Token` or "
    "`Authorization: Bearer`.",
    auth=API_AUTH,
    docs_decorator=login_required,
    urls_namespace="api",
)
api.add_router("/sessions", sessions_router, tags=["chat sessions"])
api.add_router("", scheduler_router, tags=["hosts"])
api.add_router("", runs_router)
api.add_router("/agents", agents_router, tags=["agents"])
api.add_router("", memory_router)
api.add_router("", health_router)
