"""The REST API: one NinjaAPI, one router per app, every route behind API_AUTH.

Two rules hold for every operation, whichever router declares it (common.api_contract):
the schema and docs take the same credentials as the routes, and a query parameter the
operation does not declare is a 422 naming it, not silently ignored.
"""

from ninja import NinjaAPI
from ninja.errors import ValidationError

from accounts_app.auth import API_AUTH, docs_access
from agents_app.api import router as agents_router
from common.api_contract import (
    document_common_errors,
    document_event_stream,
    one_response_per_status,
    readable_validation_error,
    reject_unknown_query_parameters,
)
from ledger_app.api import router as ledger_router
from memory_app.api import router as memory_router
from research_app.api import router as research_router
from researchagent.api_docs import SwaggerFromOwnAssets
from researchagent.health import router as health_router
from scheduler_app.api.metrics import router as metrics_router
from scheduler_app.api.queue import router as scheduler_router
from scheduler_app.api.run_batch import router as run_batch_router
from scheduler_app.api.runs import router as runs_router
from scheduler_app.api.sweep_rungs import router as sweep_rungs_router
from scheduler_app.api.sweeps import router as sweeps_router
from scheduler_app.loop_scope import LoopRefused
from sessions_app.api import router as sessions_router
from sessions_app.chat_api import router as chat_router
from sessions_app.models_api import router as models_router
from sessions_app.skills_api import router as skills_router


class AgentSysAPI(NinjaAPI):
    def get_openapi_schema(self, *, path_prefix=None, path_params=None):
        schema = super().get_openapi_schema(path_prefix=path_prefix, path_params=path_params)
        one_response_per_status(schema)
        document_event_stream(schema, prefix=self.get_root_path(path_params or {}))
        document_common_errors(schema)
        return schema

    def _get_bound_routers(self):
        # Operations are cloned per mount when the URLs are first built: guard the clones,
        # whichever router (added in any order) they come from.
        fresh = self._bound_routers_cache is None
        bound = super()._get_bound_routers()
        if fresh:
            reject_unknown_query_parameters(bound)
        return bound


api = AgentSysAPI(
    title="AgentSys API",
    version="1",
    description="Chat sessions, agents, the GPU queue, runs and memory. Authenticate with a "
    "logged-in session (plus CSRF token) or an API token in `X-Auth-Token` or "
    "`Authorization: Bearer`; the same credentials read this schema (`/api/openapi.json`). "
    "A query parameter an operation does not list is answered 422, naming it.",
    auth=API_AUTH,
    docs=SwaggerFromOwnAssets(),
    docs_decorator=docs_access,
    urls_namespace="api",
)
api.add_router("/sessions", sessions_router, tags=["chat sessions"])
api.add_router("", chat_router)
api.add_router("", models_router)
api.add_router("", skills_router, tags=["skills"])
api.add_router("", scheduler_router, tags=["hosts"])
api.add_router("", metrics_router)  # before runs: /runs/metrics is not a run id
api.add_router("", run_batch_router)  # before runs too: /runs/batch
api.add_router("", runs_router)
api.add_router("", sweeps_router)
api.add_router("", sweep_rungs_router)
api.add_router("/agents", agents_router, tags=["agents"])
api.add_router("", memory_router)
api.add_router("", research_router)
api.add_router("", ledger_router)
api.add_exception_handler(
    ValidationError, lambda request, exc: readable_validation_error(request, exc, api)
)
# A research loop's token reaching past its own runs: a 403 saying so, from every route.
api.add_exception_handler(
    LoopRefused, lambda request, exc: api.create_response(request, {"detail": str(exc)}, status=403)
)
api.add_router("", health_router)
