"""`POST /api/runs/wait` (issue 39 §3, the wait_runs MCP tool's): wait on runs until a
condition holds or a timeout, served before Django (researchagent.asgi), like /mcp.

Why not a Django view: the web runs each request's Django side on a thread of its own
(researchagent.asgi_handler), held until its response is sent; a wait of up to an hour would
hold one thread a waiter. Here a wait is a coroutine and a future (scheduler_app.run_waits):
its reads (the token, the runs, their snapshots) run on the waits' one thread.

Body: {"run_ids": [...]} or {"sweep_id": "..."}, "until" (agentsys.run_waits), "timeout_s"
(0 < t ≤ 3600, default 300). Needs an API token (X-Auth-Token, or Authorization: Bearer),
as every read of /api/ does: any valid token reads any run. Answers 200 with what woke the
wait (or that none held), 401 without a valid token, 404 naming runs or a sweep that do not
exist, 422 naming what is wrong with the body, 503 while the database does not answer. A
client that goes away ends its wait."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from accounts_app.auth import authenticate_token
from agentsys.run_waits import BadCondition, parse_until
from common.allowed_host import host_allowed
from common.db_outage import is_database_unavailable
from scheduler_app.run_wait_reads import MAX_RUNS, NotFound, TooMany
from scheduler_app.run_waits import MAX_TIMEOUT_S, on_reads_thread, wait_runs

logger = logging.getLogger(__name__)

PATH = "/api/runs/wait"
MAX_BODY = 256 * 1024
RUN_ID = Annotated[str, Field(min_length=1, max_length=40, pattern=r"^[A-Za-z0-9_-]+$")]


class WaitIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_ids: Annotated[list[RUN_ID], Field(max_length=MAX_RUNS)] = []
    sweep_id: Annotated[str, Field(max_length=40)] = ""
    until: Any = None
    timeout_s: Annotated[float, Field(gt=0, le=MAX_TIMEOUT_S)] = 300.0

    @model_validator(mode="after")
    def one_target(self) -> WaitIn:
        if bool(self.run_ids) == bool(self.sweep_id):
            raise ValueError("give run_ids or sweep_id, one of them")
        if self.until is None:
            raise ValueError("until is required")
        return self


def with_run_waits(app):
    """`app` with POST /api/runs/wait served here, before it."""

    async def http(scope, receive, send):
        if scope["type"] == "http" and scope["path"].rstrip("/") == PATH:
            return await serve_wait(scope, receive, send)
        return await app(scope, receive, send)

    return http


async def serve_wait(scope, receive, send) -> None:
    host = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
    if not host_allowed(host):
        return await _answer(send, 400, {"detail": "Host not allowed: it is not in ALLOWED_HOSTS"})
    if scope["method"] != "POST":
        return await _answer(send, 405, {"detail": f"{PATH} takes POST"})
    try:
        status, answer = await _waited(scope, receive)
    except Exception as error:
        if not is_database_unavailable(error):
            raise
        status, answer = 503, {"detail": "The database is not answering; try again shortly"}
    if status:  # 0: the client left
        await _answer(send, status, answer)


async def _waited(scope, receive) -> tuple[int, dict]:
    body, gone = await _body(receive)
    if gone:
        return 0, {}
    if body is None:
        return 413, {"detail": f"the body is over {MAX_BODY} bytes"}
    token = _token(scope)
    if not token or await on_reads_thread(authenticate_token, None, token) is None:
        return 401, {
            "detail": "an API token is required (X-Auth-Token or Bearer); "
            "this one is missing, unknown or revoked"
        }
    try:
        asked = WaitIn.model_validate_json(body or b"{}")
        conditions = parse_until(asked.until)
    except ValidationError as error:
        return 422, {"detail": _fields(error)}
    except BadCondition as error:
        return 422, {"detail": str(error)}
    waiting = asyncio.ensure_future(
        wait_runs(
            run_ids=asked.run_ids,
            sweep_id=asked.sweep_id,
            conditions=conditions,
            timeout_s=asked.timeout_s,
        )
    )
    left = asyncio.ensure_future(_disconnected(receive))
    try:
        await asyncio.wait({waiting, left}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        left.cancel()
    if not waiting.done():  # the client went away: so does its wait
        waiting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waiting
        return 0, {}
    try:
        return 200, waiting.result()
    except NotFound as missing:
        return 404, {"detail": str(missing)}
    except TooMany as error:
        return 422, {"detail": str(error)}


async def _body(receive) -> tuple[bytes | None, bool]:
    """The request's body (None: too big), and whether the client went away first."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None, True
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY:
            return None, False
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks), False


async def _disconnected(receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


def _token(scope) -> str:
    """X-Auth-Token first, then a Bearer token (the REST API's order)."""
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
    if token := headers.get("x-auth-token", "").strip():
        return token
    scheme, _, value = headers.get("authorization", "").strip().partition(" ")
    return value.strip() if scheme.lower() == "bearer" else ""


def _fields(error: ValidationError) -> str:
    """Each fault by its field, in one sentence (as the API's 422s say them)."""
    faults = []
    for fault in error.errors(include_url=False)[:5]:
        where = ".".join(str(part) for part in fault.get("loc", ()))
        message = str(fault.get("msg", "is not valid")).removeprefix("Value error, ")
        faults.append(f"{where}: {message}" if where else message)
    return "; ".join(faults)


async def _answer(send, status: int, answer: dict) -> None:
    body = json.dumps(answer).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
