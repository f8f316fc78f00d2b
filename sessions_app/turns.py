"""Starting and stopping chat turns from the web (the writes; runagentd streams them).

A turn is a ChatTurn row: the web stores the person's message and a `running` turn in one
transaction (the database allows one running turn per session, so a double submit is a
conflict, not a second stream) and wakes runagentd, which claims it, streams the reply into
the session's event stream (`chat.<session id>`) and closes it. The web never holds a turn's
state: a reply survives a restart of the web process, and any client can follow it.
"""

from __future__ import annotations

from django.db import IntegrityError, connection, transaction
from django.db.models import Max
from django.utils import timezone

from agentsys.listen import AGENTS_CHANNEL
from agentsys.types import LIVE_TURN_STATUSES, TurnStatus
from events_app.events import chat_stream, record_event
from events_app.selectors import last_seq
from sessions_app.models import ChatMessage, ChatMode, ChatSession, ChatTurn, MessageRole

MAX_MESSAGE_CHARS = 100_000


class TurnRefused(ValueError):
    """The message cannot start a turn (the text says why); `status` is the HTTP answer."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def check_message(message, mode) -> tuple[str, str]:
    if not isinstance(message, str) or not message.strip():
        raise TurnRefused("message: must not be empty")
    if len(message) > MAX_MESSAGE_CHARS:
        raise TurnRefused(
            f"message: {len(message)} characters is over the limit of {MAX_MESSAGE_CHARS}"
        )
    if "\x00" in message:
        raise TurnRefused("message: must not contain NUL characters")
    if mode not in ChatMode.values:
        raise TurnRefused(f"mode: must be one of {', '.join(ChatMode.values)}, got {mode!r}")
    return message, mode


def next_message_seq(session_id: str) -> int:
    top = ChatMessage.objects.filter(session_id=session_id).aggregate(top=Max("seq"))["top"]
    return (top or 0) + 1


def submit_turn(*, session: ChatSession, message: str, mode: str) -> ChatTurn:
    """Store the person's message and a running turn for it; runagentd is woken at commit.
    Raises TurnRefused: 400 for a bad message or mode, 409 while a turn is streaming."""
    message, mode = check_message(message, mode)
    try:
        with transaction.atomic():
            # Serialises submits of one session, so the seq of the message is unique too.
            ChatSession.objects.select_for_update().filter(pk=session.pk).first()
            if ChatTurn.objects.filter(session=session, status=TurnStatus.RUNNING).exists():
                raise TurnRefused("a reply is still streaming in this session", status=409)
            turn = ChatTurn.objects.create(
                session=session,
                mode=mode,
                message=message,
                status=TurnStatus.RUNNING,
                after_seq=last_seq(stream=chat_stream(session.pk)),
            )
            user_message = ChatMessage.objects.create(
                session=session,
                seq=next_message_seq(session.pk),
                role=MessageRole.USER,
                content=message,
                turn=turn,
            )
            turn.user_message = user_message
            turn.save(update_fields=["user_message"])
            ChatSession.objects.filter(pk=session.pk).update(mode=mode, updated_at=timezone.now())
            record_event(
                stream=chat_stream(session.pk),
                kind="user_message",
                payload={"turn_id": turn.id, "seq": user_message.seq, "content": message},
            )
            _wake_runagentd(turn.id)
    except IntegrityError:  # the one-running-turn constraint: another submit won the race
        raise TurnRefused("a reply is still streaming in this session", status=409) from None
    return turn


def stop_turn(*, session: ChatSession) -> ChatTurn | None:
    """Ask runagentd to stop the session's streaming turn (a queued one is just dropped).
    The daemon sees the status change at its next delta and aborts the model's work."""
    with transaction.atomic():
        turns = list(
            ChatTurn.objects.select_for_update().filter(
                session=session, status__in=LIVE_TURN_STATUSES
            )
        )
        for turn in turns:
            if turn.status == TurnStatus.QUEUED or turn.host_id is None:
                turn.status, turn.finished_at = TurnStatus.STOPPED, timezone.now()
                turn.save(update_fields=["status", "finished_at", "updated_at"])
                record_event(
                    stream=chat_stream(session.pk),
                    kind="session_status",
                    payload={"turn_id": turn.id, "status": "idle", "outcome": "stopped"},
                )
            else:
                turn.stop_requested = True
                turn.save(update_fields=["stop_requested", "updated_at"])
        _wake_runagentd("stop")
    return next((t for t in turns if t.status == TurnStatus.RUNNING), None)


def _wake_runagentd(payload: str) -> None:
    with connection.cursor() as cursor:  # delivered at commit
        cursor.execute("SELECT pg_notify(%s, %s)", [AGENTS_CHANNEL, payload])
