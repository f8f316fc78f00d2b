"""WebSocket of one chat session's stream: `ws/chat/<session id>/?after=<seq>`.

The same events as the NDJSON stream (sessions_app.chat_api), each one JSON text frame in the
shape of the agents feed (`Event.as_message()`: id = seq, kind, payload), with the same
resume rule: `?after=<last id seen>` gets the rest with no gap and no duplicate; without it,
only what comes after the connection. A session the caller may not see closes the socket
with 4404, as an unknown one does.
"""

from __future__ import annotations

from channels.db import database_sync_to_async

from events_app.consumers import AgentEventsConsumer
from events_app.events import chat_stream
from sessions_app import selectors

CLOSE_NOT_FOUND = 4404


@database_sync_to_async
def _visible(user, session_id: str) -> bool:
    owner = user if user is not None and user.is_authenticated else None
    return selectors.sessions_for(user=owner, include_archived=True).filter(pk=session_id).exists()


class ChatEventsConsumer(AgentEventsConsumer):
    async def _connect(self):
        session_id = self.scope["url_route"]["kwargs"]["session_id"]
        if await self._authenticated() and not await _visible(self.scope.get("user"), session_id):
            await self.accept()
            await self.close(code=CLOSE_NOT_FOUND, reason="no such chat session")
            return
        self.stream = chat_stream(session_id)
        await super()._connect()
