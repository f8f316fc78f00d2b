"""What every API operation promises, whichever router declares it.

- The schema (`/api/openapi.json`) and the docs page take the credentials the routes take (an
  API token or a logged-in session): a script generates its client from the schema with the
  token it calls the API with.
- A query parameter the operation does not declare is a 422 naming it: `?tags=lr` where the
  route takes `tag` must not quietly return every row.
- Every error is `{"detail": "<one readable line>"}`; validation errors add `errors`, the
  list of what failed, and every operation documents 401, 422 and 503 in that shape.
- An agent's token (accounts_app: a research loop's own) reads what the person who started
  the loop may read but changes only runs and sweeps (AGENT_WRITES), and of those only its own
  loop's (scheduler_app.loop_scope); any other write is a 403 saying so, documented as such.
- The live event stream (`events_app.sse`, a streaming Django view outside ninja) is in the
  schema like any other route.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated
from urllib.parse import urlencode

from ninja.errors import ValidationError
from pydantic import AfterValidator

API_PREFIX = "/api/"

ERROR_SCHEMA = {
    "title": "Error",
    "type": "object",
    "properties": {
        "detail": {"type": "string", "description": "what went wrong, in one line"},
        "errors": {
            "type": "array",
            "items": {"type": "object"},
            "description": "validation errors: each with `loc` (where) and `msg` (what)",
        },
    },
    "required": ["detail"],
}
COMMON_ERRORS = {
    "400": "A malformed request: NUL characters, or a body that is not JSON",
    "401": "Not authenticated: log in, or send an API token",
    "422": "Invalid input (body, path or query), or a query parameter the route does not take",
    "503": "The database is unreachable; retry after the Retry-After seconds",
}
# What an agent's token may change: make (one or a batch), start, stop and rerun runs, and
# make sweeps (a path as requested, or as the schema writes it: `/api/runs/{run_id}/start`).
AGENT_WRITES = re.compile(r"/api/(runs|runs/batch|sweeps|runs/[^/]+/(start|stop|rerun))/?")
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
AGENT_REFUSED = (
    "An agent's token may read, make, start, stop and rerun runs and make sweeps, nothing else"
)
LOOP_OUTSIDE_ITS_SWEEP = (
    "A research loop's token, on a run or sweep that is not its loop's own "
    "(scheduler_app.loop_scope)"
)
# Past this a list offset is a mistake, and PostgreSQL's OFFSET (a bigint) would overflow.
MAX_OFFSET = 1_000_000_000
NOT_FOUND = "No such row: the id in the path names nothing"


def agent_may(method: str, path: str) -> bool:
    """May an agent's token make this request?"""
    return method.upper() in SAFE_METHODS or AGENT_WRITES.fullmatch(path) is not None


def _in_utc(value: datetime) -> datetime:
    # PostgreSQL takes offsets up to ±15:59 only; ISO 8601 allows ±23:59 (a 500 before).
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError("out of range once converted to UTC") from None


# A point in time from a query string: naive means UTC; any offset is accepted.
Instant = Annotated[datetime, AfterValidator(_in_utc)]


def readable_validation_error(request, exc: ValidationError, api):
    """ninja's 422 with a `detail` line a person can read (`body.params: ...; query.limit:
    ...`) and the structured list kept under `errors`."""
    lines = []
    for error in exc.errors:
        where = ".".join(str(part) for part in error.get("loc", ()))
        lines.append(f"{where}: {error.get('msg', 'invalid')}" if where else error.get("msg"))
    detail = "; ".join(str(line) for line in lines) or "invalid input"
    return api.create_response(request, {"detail": detail, "errors": exc.errors}, status=422)


def _declared_query_names(operation) -> frozenset[str]:
    names: set[str] = set()
    for model in operation.models:
        if getattr(model, "__ninja_param_source__", None) != "query":
            continue
        flatten = getattr(model, "__ninja_flatten_map__", None) or {}
        names.update(flatten)
        for name, field in model.model_fields.items():
            names.add(field.alias or name)
    return frozenset(names)


def _unknown_query_response(operation, request):
    allowed = operation._agentsys_query_names
    unknown = sorted(set(request.GET) - allowed)
    if not unknown:
        return None
    takes = ", ".join(sorted(allowed)) or "no query parameters"
    errors = [
        {"type": "unknown_parameter", "loc": ["query", name], "msg": "unknown parameter"}
        for name in unknown
    ]
    detail = f"unknown query parameter {', '.join(map(repr, unknown))}; this route takes {takes}"
    return operation.api.create_response(request, {"detail": detail, "errors": errors}, status=422)


def guard_query_parameters(operation) -> None:
    """Make `operation` answer 422 to query parameters it does not declare, after its
    authentication (an anonymous caller learns nothing about the route)."""
    operation._agentsys_query_names = _declared_query_names(operation)
    checks = operation._run_checks
    if operation.is_async:

        async def run_checks(request):
            return await checks(request) or _unknown_query_response(operation, request)

    else:

        def run_checks(request):
            return checks(request) or _unknown_query_response(operation, request)

    operation._run_checks = run_checks


def reject_unknown_query_parameters(bound_routers) -> None:
    for router in bound_routers:
        for path_view in router.path_operations.values():
            for operation in path_view.operations:
                guard_query_parameters(operation)


def one_response_per_status(schema: dict) -> None:
    """ninja keys the responses it derives from `response=` by int and `openapi_extra` adds
    string keys: both became a `"200"` in the JSON, which YAML-strict readers (Swagger UI,
    client generators) refuse. Merge them, the declared description and media types winning
    over ninja's bare "OK"."""
    for operations in schema.get("paths", {}).values():
        for operation in operations.values():
            merged: dict[str, dict] = {}
            for status, response in operation.get("responses", {}).items():
                before = merged.get(str(status), {})
                content = {**before.get("content", {}), **response.get("content", {})}
                merged[str(status)] = {**before, **response}
                if content:
                    merged[str(status)]["content"] = content
            operation["responses"] = merged


def document_common_errors(schema: dict) -> None:
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components["Error"] = ERROR_SCHEMA
    error_body = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    for path, operations in schema.get("paths", {}).items():
        errors = {**COMMON_ERRORS, **({"404": NOT_FOUND} if "{" in path else {})}
        for method, operation in operations.items():
            responses = operation.setdefault("responses", {})
            refused = {"403": AGENT_REFUSED}
            if method.upper() in SAFE_METHODS:
                refused = {}
            elif agent_may(method, path):
                refused = {"403": LOOP_OUTSIDE_ITS_SWEEP}
            for status, description in {**errors, **refused}.items():
                if status not in responses:
                    responses[status] = {"description": description, "content": error_body}


def document_event_stream(schema: dict, *, prefix: str) -> None:
    """`GET /api/agents/events` (events_app.sse) as the schema's one streaming operation."""
    example = urlencode({"after": 0})
    schema.setdefault("paths", {})[f"{prefix}agents/events"] = {
        "get": {
            "operationId": "agents_app_sse_agent_events",
            "summary": "The live agents event stream (Server-Sent Events)",
            "description": (
                "An endless `text/event-stream`: each event is `id: <seq>`, `event: <kind>`, "
                '`data: {"id", "stream", "kind", "agent_id", "payload", "created_at"}`; a '
                "`: keepalive` comment after each quiet interval. Resume with the "
                f"`Last-Event-ID` header (what EventSource sends) or `?{example}` (0: the "
                "whole stream); with neither, only newer events arrive. Ids count 1, 2, 3... "
                "with no holes, so nothing is missed or repeated across reconnects."
            ),
            "tags": ["agents"],
            "parameters": [
                {
                    "in": "query",
                    "name": "after",
                    "required": False,
                    "schema": {"type": "integer", "minimum": 0},
                    "description": "start after this event id",
                },
                {
                    "in": "header",
                    "name": "Last-Event-ID",
                    "required": False,
                    "schema": {"type": "integer", "minimum": 0},
                    "description": "the last id seen; wins over `after`",
                },
            ],
            "responses": {
                "200": {
                    "description": "the stream, until the client disconnects",
                    "content": {"text/event-stream": {"schema": {"type": "string"}}},
                },
                "400": {
                    "description": "a malformed `after` or `Last-Event-ID`",
                    "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/Error"}}
                    },
                },
            },
            "security": [{"TokenHeaderAuth": []}, {"BearerTokenAuth": []}, {"SessionAuth": []}],
        }
    }
