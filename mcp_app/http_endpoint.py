"""`/mcp` on the web server (issue 23, part 4): AgentSys's MCP tools over streamable HTTP for
any MCP client, the ones `manage.py mcp` serves over stdio (no quick_bash: the shell stays the
research agent's own).

Every request needs an API token, `Authorization: Bearer <token>` or `X-Auth-Token: <token>`;
none, or one that is unknown or revoked, is answered 401 with a JSON `detail` saying which. A
login session is not accepted here (an API for MCP clients, not for pages; so no CSRF either),
and the Host header is checked against ALLOWED_HOSTS as Django checks it for every other path.

The tools act as the caller: each REST call a tool makes (in this process, through the ASGI
app, as `manage.py mcp` does) carries the token its /mcp request came with, so a token revoked
is refused from the next call on, even inside a tool call in progress (wait_run's next poll).

The server is built once per process, on first use (FastMCP is imported then, not at the web
process's start). daphne runs no ASGI lifespan and FastMCP's HTTP app needs one (its session
manager's task group): `McpEndpoint` runs it in a task of its own on the web process's event
loop from the first request until `aclose()`. The app is stateless and answers each POST with
one JSON response (no event stream), so the web process has nothing open-ended to end at its
stop and exits without closing it.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging

from asgiref.sync import ThreadSensitiveContext
from channels.db import database_sync_to_async
from django.conf import settings
from starlette.datastructures import Headers

from accounts_app.auth import authenticate_token
from common.allowed_host import host_allowed
from common.db_outage import is_database_unavailable
from mcp_app.rest_in_process import in_process_rest

logger = logging.getLogger(__name__)

PATHS = ("/mcp", "/mcp/")
CALLER_KEY = "agentsys.mcp_token"  # the scope key of the caller's checked token
MISSING = (
    "No API token: send Authorization: Bearer <token> (or X-Auth-Token: <token>); "
    "make one with manage.py apitoken or on the settings page"
)
REFUSED = "The API token is unknown or revoked"


def with_mcp(django_app):
    """The HTTP side of researchagent.asgi: /mcp and /mcp/ to the MCP endpoint, the rest to
    Django."""
    endpoint = McpEndpoint(django_app)

    async def http(scope, receive, send):
        if scope["path"] in PATHS:
            return await endpoint(scope, receive, send)
        return await django_app(scope, receive, send)

    http.mcp_endpoint = endpoint
    return http


def _caller_token() -> str:
    """The checked token of the /mcp request a tool is serving."""
    from fastmcp.server.dependencies import get_http_request

    return get_http_request().scope[CALLER_KEY]


class McpEndpoint:
    """The token check in front of FastMCP's streamable-HTTP app, and that app's lifespan."""

    def __init__(self, rest_app):
        self._rest_app = rest_app
        self._app = None
        self._building: asyncio.Future | None = None
        self._task: asyncio.Task | None = None
        self._ready: asyncio.Future | None = None
        self._stop = asyncio.Event()

    async def __call__(self, scope, receive, send):
        headers = Headers(scope=scope)
        if not host_allowed(headers.get("host", "")):
            return await _answer(send, 400, "Host not allowed: it is not in ALLOWED_HOSTS")
        candidates = _tokens_in(headers)
        if not candidates:
            return await _answer(send, 401, MISSING, challenge=True)
        try:
            async with ThreadSensitiveContext():
                token = await _accepted(candidates)
        except Exception as error:
            if not is_database_unavailable(error):
                raise
            return await _answer(send, 503, "The database is not answering; try again shortly")
        if token is None:
            return await _answer(send, 401, REFUSED, challenge=True)
        try:
            app = await self._started()
        except Exception as error:
            logger.exception("The MCP server did not start")
            return await _answer(send, 503, f"The MCP server did not start: {error}")
        await app({**scope, "path": PATHS[0], CALLER_KEY: token}, receive, send)

    async def _started(self):
        """FastMCP's HTTP app, its lifespan running (started now unless it is)."""
        if self._app is None:
            # Built on a thread: FastMCP's import takes a second or two (over five on a busy
            # machine), which every other request of this process (pages, feeds, health
            # probes) would wait out on the event loop. First requests share one build.
            if self._building is None:
                self._building = asyncio.ensure_future(asyncio.to_thread(self._build))
            try:
                app = await asyncio.shield(self._building)
            except Exception:
                self._building = None  # the next request tries again
                raise
            self._app = app
        if self._task is None or self._task.done():
            self._stop.clear()
            self._ready = asyncio.get_running_loop().create_future()
            # A context of its own: not the first request's, whose task may end or be cancelled.
            self._task = asyncio.create_task(self._serve(), context=contextvars.Context())
        await asyncio.shield(self._ready)
        return self._app

    def _build(self):
        # Imported here: FastMCP takes a second or two to import, which a web process that
        # serves no MCP client should not spend at its start.
        from agentsys.mcp.research_server import client_server
        from agentsys.mcp.run_tools import AgentSysAPI

        api = AgentSysAPI("", _caller_token, client=in_process_rest(self._rest_app))
        server = client_server(settings.AGENTSYS_WORKDIR, api)
        return server.http_app(path=PATHS[0], stateless_http=True, json_response=True)

    async def _serve(self) -> None:
        ready = self._ready
        try:
            async with self._app.lifespan(self._app):
                ready.set_result(None)
                await self._stop.wait()
        except asyncio.CancelledError:
            ready.cancel()
            raise
        except Exception as error:
            if ready.done():
                logger.exception("The MCP server's lifespan ended with an error")
            else:
                ready.set_exception(error)

    async def aclose(self) -> None:
        """End the lifespan (the session manager's task group); a later request starts it
        again."""
        if self._task is not None:
            self._stop.set()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None


def _tokens_in(headers: Headers) -> list[str]:
    """The tokens a request offers, X-Auth-Token first (the REST API's order)."""
    found = [headers.get("x-auth-token", "").strip()]
    scheme, _, value = headers.get("authorization", "").strip().partition(" ")
    if scheme.lower() == "bearer":
        found.append(value.strip())
    return [token for token in found if token]


@database_sync_to_async
def _accepted(candidates: list[str]) -> str | None:
    """The first of `candidates` the REST API accepts (a user's live token, or the
    deployment's RESEARCH_AGENT_USER_AUTH_TOKEN), or None."""
    return next((c for c in candidates if authenticate_token(None, c) is not None), None)


async def _answer(send, status: int, detail: str, *, challenge: bool = False) -> None:
    """A refusal as the REST API words one (`detail`) and as a JSON-RPC error, which an MCP
    client shows its user in place of a bare status."""
    error = {"code": -32001 if status == 401 else -32000, "message": detail}
    body = json.dumps({"detail": detail, "jsonrpc": "2.0", "id": None, "error": error}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    if challenge:
        headers.append((b"www-authenticate", b'Bearer realm="agentsys"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
