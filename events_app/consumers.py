"""WebSocket of the agents event stream: `ws/agents/events/?after=<seq>`.

Each event arrives as one JSON text frame, `Event.as_message()`; its `id` is the seq to resume
from (`?after=<last id seen>`). Without `after` the socket carries only events newer than the
connection; `after=0` replays the whole stream first.

Authentication: a logged-in session, or the API token in an `X-Auth-Token` or
`Authorization: Bearer` handshake header (asgi.py also wants an allowed `Origin`). Without
either, the socket closes with 4401; a malformed `after` closes it with 4400 after one
`{"error": ...}` frame. While the database is down a socket without `after` closes with 4503
(try again later); an open one, or one resuming, waits and carries on from where it was once
the database is back. A feed that fails otherwise closes the socket with 4500, and when the
web server stops, open sockets close with 4503: reconnect with `?after=<last id seen>`.

A server may close a WebSocket only with 1000 or a code in 3000-4999 (daphne's autobahn refuses
the rest, 1011 and 1013 included, with an exception that left the socket open and silent), so
these are the HTTP-like codes of the private range.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from accounts_app.auth import ENV_TOKEN, token_caller
from common.db_outage import DATABASE_ERRORS
from events_app import selectors
from events_app.events import AGENTS_STREAM
from events_app.feed import parse_resume_point
from events_app.live_hub import message_text
from events_app.steady_feed import follow_steadily

logger = logging.getLogger(__name__)

CLOSE_UNAUTHENTICATED = 4401
CLOSE_BAD_REQUEST = 4400
CLOSE_SERVER_ERROR = 4500
CLOSE_TRY_AGAIN_LATER = 4503
CLOSE_SERVER_STOPPING = CLOSE_TRY_AGAIN_LATER  # reconnect with ?after= once it is back


def api_token(*, x_auth_token: str = "", authorization: str = "") -> str | None:
    """The API token a client presents: `X-Auth-Token: t` or `Authorization: Bearer t`."""
    if x_auth_token.strip():
        return x_auth_token.strip()
    scheme, _, credentials = authorization.strip().partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip()
    return None


def _header(scope, name: bytes) -> str:
    return next((v.decode("latin1") for k, v in scope.get("headers", []) if k.lower() == name), "")


class AgentEventsConsumer(AsyncJsonWebsocketConsumer):
    # The feed subscribes to the channel layer on its own channel; the consumer needs none
    # (an alias with no layer makes channels skip creating and polling one per socket).
    channel_layer_alias = "agentsys.feed-subscribes-itself"
    stream = AGENTS_STREAM
    forwarder: asyncio.Task | None = None

    async def connect(self):
        try:
            await self._connect()
        except DATABASE_ERRORS:
            await self.accept()  # so that the client can read why
            await self.send_json({"error": "the database is unavailable; try again shortly"})
            await self.close(code=CLOSE_TRY_AGAIN_LATER, reason="database unavailable")

    async def _connect(self):
        if not await self._authenticated():
            # Accept only to close with a code a browser can read (a refused handshake shows
            # it only 1006): 4401 tells the page to log in again, not to retry.
            await self.accept()
            await self.close(code=CLOSE_UNAUTHENTICATED, reason="authentication required")
            return
        query = parse_qs(self.scope["query_string"].decode("latin1"), keep_blank_values=True)
        try:
            after = parse_resume_point(query["after"][-1] if "after" in query else None)
        except ValueError as error:
            await self.accept()  # so that the client can read why
            await self.send_json({"error": f"after: {error}"})
            await self.close(code=CLOSE_BAD_REQUEST, reason="bad after")
            return
        if after is None:  # before accepting: every event after the handshake is sent
            after = await database_sync_to_async(selectors.last_seq)(stream=self.stream)
        await self.accept()
        self.forwarder = asyncio.create_task(self._forward(after))

    async def _authenticated(self) -> bool:
        user = self.scope.get("user")
        if user is not None and user.is_authenticated:
            return True
        token = api_token(
            x_auth_token=_header(self.scope, b"x-auth-token"),
            authorization=_header(self.scope, b"authorization"),
        )
        caller = await token_caller(token)
        if caller is not None and caller != ENV_TOKEN:
            # A user's token reads as that user (a chat feed: only the chats they may see),
            # as on the API; the deployment's token stands for no user and sees them all.
            self.scope["user"] = caller
        return caller is not None

    async def _forward(self, after: int) -> None:
        try:
            async with contextlib.aclosing(follow_steadily(self.stream, after)) as feed:
                async for message in feed:
                    if message is not None:  # keepalives: daphne pings the socket itself
                        await self.send(text_data=message_text(message))
            # The feed ends only when the web process stops (common.draining).
            await self.close(code=CLOSE_SERVER_STOPPING, reason="server stopping")
        except asyncio.CancelledError:
            raise
        except Exception:
            # The client reconnects with the last id it saw and loses nothing.
            logger.exception("%s feed failed", self.stream)
            try:
                await self.close(code=CLOSE_SERVER_ERROR)
            except Exception:  # the client went away meanwhile
                logger.warning("%s feed: could not close its socket", self.stream)

    async def receive(self, text_data=None, bytes_data=None, **kwargs):
        pass  # the stream is one-way: what a client sends, JSON or not, is ignored

    async def disconnect(self, code):
        if self.forwarder is not None:
            self.forwarder.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.forwarder
