"""Chat turns over HTTP: `POST /api/chat` starts one and streams it as NDJSON,
`GET /api/sessions/{id}/stream` replays and follows, `POST /api/sessions/{id}/stop` stops it.

Each NDJSON line is one event of the session's stream (`chat.<session id>`), stored before it
is sent: `{"seq", "type", "turn_id", ...}` with type `user_message`, `system_message`,
`provenance`, `part_delta` {id, ptype, delta}, `part_update` (a tool part), `l1_action`,
`error`, `session_title` {title} (a model wrote the chat's title beside its first turn;
it may come after that turn's end), and `session_status` {status: idle, outcome} last. A
client that lost the connection asks for `stream?after=<last seq it saw>` and gets the rest:
no gap, no duplicate, whichever process restarted in between. `{"type": "keepalive"}` lines
(no seq) keep a quiet connection open.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator

from channels.db import database_sync_to_async
from django.http import Http404, StreamingHttpResponse
from ninja import Field, Router, Schema
from ninja.errors import HttpError
from pydantic import ConfigDict

from agentsys.types import LIVE_TURN_STATUSES
from events_app.events import chat_stream
from events_app.feed import parse_resume_point
from events_app.selectors import last_seq
from events_app.steady_feed import follow_steadily
from sessions_app import selectors, turns
from sessions_app.models import ChatTurn

logger = logging.getLogger(__name__)
router = Router(tags=["chat"])

KEEPALIVE_SECONDS = 15.0
NDJSON = "application/x-ndjson"
ERROR_BODY = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
STREAM_DOC = {
    "200": {
        "description": "One JSON event per line (NDJSON), ending with the turn's "
        "`session_status` idle event",
        "content": {NDJSON: {"schema": {"type": "string"}}},
    }
}


class ChatIn(Schema):
    model_config = ConfigDict(extra="forbid")

    session_id: str = Field(..., max_length=40)
    message: str = Field(..., description="At most 100,000 characters")
    mode: str = Field("auto", description="wild | auto | agent")


class StopOut(Schema):
    stopping: str | None = Field(None, description="The turn being stopped, if one streamed")


def _session(request, session_id: str):
    session = selectors.visible_session(request, session_id)
    if session is None:
        raise Http404(f"No chat session {session_id!r}")
    return session


def ndjson_line(message: dict) -> bytes:
    payload = message.get("payload") or {}
    line = {**payload, "seq": message["id"], "type": message["kind"]}
    line["created_at"] = message["created_at"]
    return (json.dumps(line, separators=(",", ":")) + "\n").encode()


KEEPALIVE_LINE = b'{"type":"keepalive"}\n'


@database_sync_to_async
def _live_turns(session_id: str) -> bool:
    return ChatTurn.objects.filter(session_id=session_id, status__in=LIVE_TURN_STATUSES).exists()


async def follow_turns(
    session_id: str, after: int, *, until_turn: str | None = None
) -> AsyncIterator[bytes]:
    """Events after `after`; ends after the idle of `until_turn`, or (without one) once no
    turn of the session is queued or streaming."""
    replay_only = until_turn is None and not await _live_turns(session_id)
    keepalive = 0.05 if replay_only else KEEPALIVE_SECONDS
    try:
        async with contextlib.aclosing(
            follow_steadily(chat_stream(session_id), after, keepalive=keepalive)
        ) as feed:
            async for message in feed:
                if message is None:
                    # Quiet: a replay is complete; a follow checks whether anything is live.
                    if replay_only or (until_turn is None and not await _live_turns(session_id)):
                        return
                    yield KEEPALIVE_LINE
                    continue
                yield ndjson_line(message)
                if message["kind"] != "session_status" or replay_only:
                    continue
                turn = (message.get("payload") or {}).get("turn_id")
                if until_turn is not None and turn == until_turn:
                    return
                if until_turn is None and not await _live_turns(session_id):
                    return
    except Exception:  # ends the response; the client resumes with after=<last seq>
        logger.exception("chat stream of %s failed", session_id)


def _streaming(body: AsyncIterator[bytes]) -> StreamingHttpResponse:
    response = StreamingHttpResponse(body, content_type=NDJSON)
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response


@router.post(
    "/chat",
    summary="Send a message; the answer streams back as NDJSON",
    response={200: None},
    openapi_extra={
        "responses": {
            **STREAM_DOC,
            "404": {"description": "No such chat session", "content": ERROR_BODY},
            "409": {
                "description": "A reply is still streaming in this session",
                "content": ERROR_BODY,
            },
        }
    },
)
def chat(request, payload: ChatIn):
    session = _session(request, payload.session_id)
    try:
        turn = turns.submit_turn(session=session, message=payload.message, mode=payload.mode)
    except turns.TurnRefused as refused:
        raise HttpError(refused.status, str(refused)) from None
    return _streaming(follow_turns(session.pk, turn.after_seq, until_turn=turn.id))


@router.get(
    "/sessions/{session_id}/stream",
    summary="Replay a session's events after a seq, and follow its live turn",
    response={200: None},
    openapi_extra={"responses": STREAM_DOC},
)
def stream(request, session_id: str, after: str | None = None):
    session = _session(request, session_id)
    try:
        resume = parse_resume_point(after)
    except ValueError as error:
        raise HttpError(400, f"after: {error}") from None
    if resume is None:  # from the start of the live turn, else only what comes next
        live = (
            ChatTurn.objects.filter(session=session, status__in=LIVE_TURN_STATUSES)
            .order_by("started_at")
            .first()
        )
        resume = live.after_seq if live else last_seq(stream=chat_stream(session.pk))
    return _streaming(follow_turns(session.pk, resume))


@router.post(
    "/sessions/{session_id}/stop", response=StopOut, summary="Stop the reply that is streaming"
)
def stop(request, session_id: str):
    session = _session(request, session_id)
    turn = turns.stop_turn(session=session)
    return {"stopping": turn.id if turn else None}
