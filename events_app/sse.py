"""`GET /api/agents/events`: the agents event stream as Server-Sent Events.

Each event is one SSE message, `id: <seq>`, `event: <kind>`, `data: <Event.as_message() JSON>`.
A browser's EventSource reconnects by itself and sends the last id it saw as `Last-Event-ID`;
the stream resumes right after it, with nothing missed and nothing repeated. A script can
start from `?after=<seq>` instead (`after=0`: the whole stream); with neither, only events
newer than the request arrive. A `: keepalive` comment goes out at once (the client knows it
is connected) and after every quiet interval, so that proxies keep the connection open. An
open stream outlasts a database outage and goes on from where it was; a new request while the
database is down gets a 503. When the web server stops, the stream ends cleanly.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator

from channels.db import database_sync_to_async
from django.http import HttpRequest, JsonResponse, StreamingHttpResponse
from django.views.decorators.http import require_GET

from accounts_app.auth import token_accepted
from events_app import selectors
from events_app.consumers import api_token
from events_app.events import AGENTS_STREAM
from events_app.feed import parse_resume_point
from events_app.live_hub import message_text
from events_app.steady_feed import follow_steadily

logger = logging.getLogger(__name__)

KEEPALIVE_SECONDS = 15.0  # tests shorten it
KEEPALIVE_FRAME = b": keepalive\n\n"


async def _authenticated(request: HttpRequest) -> bool:
    """The API's rule (accounts_app.auth.API_AUTH): the API token, or a logged-in session.
    The stream only reads, so the session needs no CSRF token."""
    token = api_token(
        x_auth_token=request.headers.get("X-Auth-Token", ""),
        authorization=request.headers.get("Authorization", ""),
    )
    if await token_accepted(token):
        return True
    user = await request.auser()
    return user.is_authenticated


def _resume_point(request: HttpRequest) -> int | None:
    """Last-Event-ID (an EventSource reconnecting) wins over ?after= (a script starting)."""
    if "Last-Event-ID" in request.headers:
        try:
            return parse_resume_point(request.headers["Last-Event-ID"])
        except ValueError as error:
            raise ValueError(f"Last-Event-ID: {error}") from None
    if "after" in request.GET:
        try:
            return parse_resume_point(request.GET["after"])
        except ValueError as error:
            raise ValueError(f"after: {error}") from None
    return None


def sse_frame(message: dict) -> bytes:
    # Whitespace in the kind collapsed: a line break in it would end the `event:` field.
    kind = " ".join(str(message["kind"]).split()) or "message"
    data = message_text(message)  # JSON escapes line breaks: one line
    return f"id: {message['id']}\nevent: {kind}\ndata: {data}\n\n".encode()


async def _frames(stream: str, after: int) -> AsyncIterator[bytes]:
    # At once: the response (headers included) reaches the client now, not with the first
    # event, so a client of a quiet stream knows it is connected.
    yield KEEPALIVE_FRAME
    try:
        async with contextlib.aclosing(
            follow_steadily(stream, after, keepalive=KEEPALIVE_SECONDS)
        ) as feed:
            async for message in feed:
                yield KEEPALIVE_FRAME if message is None else sse_frame(message)
    except Exception:
        # Ends the response; the client reconnects with Last-Event-ID and loses nothing.
        logger.exception("agent event stream failed")


@require_GET
async def agent_events(request: HttpRequest):
    if not await _authenticated(request):
        return JsonResponse({"detail": "Unauthorized"}, status=401)
    try:
        after = _resume_point(request)
    except ValueError as error:
        return JsonResponse({"detail": str(error)}, status=400)
    if after is None:
        after = await database_sync_to_async(selectors.last_seq)(stream=AGENTS_STREAM)
    response = StreamingHttpResponse(
        _frames(AGENTS_STREAM, after), content_type="text/event-stream; charset=utf-8"
    )
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # nginx: pass each event on at once
    return response
