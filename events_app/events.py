"""Writing to the durable event log and pushing each event live.

`record_event` is the one way an event enters the system: it takes the next sequence number
of its stream (row lock until commit), stores the event, and after commit sends it to the
channel-layer group of its stream. Readers (WebSocket, SSE) replay from the table and follow
the group; see events_app.feed.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import connection, transaction
from django.utils import timezone

from common.json_safe import json_safe
from events_app.models import Event

logger = logging.getLogger(__name__)

AGENTS_STREAM = "agents"
MESSAGE_TYPE = "agentsys.event"  # the consumer method that receives it: agentsys_event
_GROUP_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
# Bytes of JSON sent inline. channels-postgres base64s the msgpack (about the JSON's size) into
# the NOTIFY payload with the channel name: 4,000 leaves that well under 8,000.
INLINE_LIMIT = 4000


def chat_stream(session_id: str) -> str:
    return f"chat.{session_id}"


def group_for(stream: str) -> str:
    """Channel-layer group of a stream (group names allow only [A-Za-z0-9._-], < 100 chars)."""
    return "events." + _GROUP_UNSAFE.sub("_", stream)[:90]


def layer_message(message: dict) -> dict:
    """The channel-layer message that carries a stored event (Event.as_message()) live: the
    event itself when small, else a reference that the feed resolves from the table."""
    size = len(json.dumps(message, separators=(",", ":"), default=str).encode())
    if size <= INLINE_LIMIT:
        return {"type": MESSAGE_TYPE, "event": message}
    reference = {"id": message["id"], "stream": message["stream"], "kind": message["kind"]}
    return {"type": MESSAGE_TYPE, "event": {**reference, "reference": True}}


# The stream's next number and the event's row in one statement: one round trip per event,
# at least two of which every run costs (issue 25). The stream's row stays locked until the
# caller's commit, so its events are numbered in commit order, without holes.
_INSERT_NUMBERED = """
    WITH numbered AS (
        INSERT INTO agents_app_eventstream (name, last_seq) VALUES (%s, 1)
        ON CONFLICT (name) DO UPDATE SET last_seq = agents_app_eventstream.last_seq + 1
        RETURNING last_seq
    )
    INSERT INTO agents_app_event (stream, seq, kind, agent_id, payload, created_at)
    SELECT %s, last_seq, %s, %s, %s::jsonb, %s FROM numbered
    RETURNING id, seq
"""


# No savepoint: inside a caller's transaction (a status change) it would cost two more round
# trips per event, and nothing here fails in a way a caller recovers from (issue 25).
@transaction.atomic(savepoint=False)
def record_event(
    *,
    stream: str,
    kind: str,
    agent_id: str = "",
    payload: dict | None = None,
    publish_live: bool = True,
) -> Event:
    """Store an event. With publish_live (the default) it is also sent live after commit;
    runagentd passes False and publishes from its own event loop instead."""
    event = Event(
        stream=stream,
        kind=kind,
        agent_id=agent_id,
        payload=json_safe(payload or {}),
        created_at=timezone.now(),
    )
    with connection.cursor() as cursor:
        cursor.execute(
            _INSERT_NUMBERED,
            [stream, stream, kind, agent_id, json.dumps(event.payload), event.created_at],
        )
        event.id, event.seq = cursor.fetchone()
    event._state.adding, event._state.db = False, connection.alias
    if publish_live:
        transaction.on_commit(lambda: publish(event))
    return event


@transaction.atomic(savepoint=False)
def record_events(*, stream: str, events: list[tuple[str, str, dict]]) -> list[Event]:
    """Store several events of one stream, in order, in two round trips whatever their
    number: each (kind, agent_id, payload). Not published live (runagentd publishes)."""
    if not events:
        return []
    with connection.cursor() as cursor:
        cursor.execute(_RESERVE_NUMBERS, [stream, len(events), len(events)])
        last = cursor.fetchone()[0]
    now = timezone.now()
    first = last - len(events) + 1
    return Event.objects.bulk_create(
        Event(
            stream=stream,
            seq=first + i,
            kind=kind,
            agent_id=agent_id,
            payload=json_safe(payload or {}),
            created_at=now,
        )
        for i, (kind, agent_id, payload) in enumerate(events)
    )


_RESERVE_NUMBERS = """
    INSERT INTO agents_app_eventstream (name, last_seq) VALUES (%s, %s)
    ON CONFLICT (name) DO UPDATE SET last_seq = agents_app_eventstream.last_seq + %s
    RETURNING last_seq
"""


_live_loop: asyncio.AbstractEventLoop | None = None


def publish_through(loop: asyncio.AbstractEventLoop) -> None:
    """Publish this process's events through `loop` (runagentd's, a worker's), whichever
    thread records them. Without it, a thread's publish runs the channel layer on an event
    loop of its own (async_to_sync) while the layer's connection pool belongs to the
    process's loop: after a PostgreSQL restart the pool reconnects on that loop's tasks, and
    the thread's publish waited on them -- a memory thread, and runagentd's exit behind it,
    hung past 10 s (CI, test_postgres_restart)."""
    global _live_loop
    _live_loop = loop


def publish(event: Event) -> None:
    """Send a stored event to live subscribers. Losing this only delays them: readers fill
    any gap from the table, so a failure is logged, never raised into the writer; and where
    a publishing loop is set, the writer does not wait for it at all."""
    loop = _live_loop
    if loop is not None and not loop.is_closed():
        sending = publish_message(event.as_message())
        try:
            asyncio.run_coroutine_threadsafe(sending, loop)
        except RuntimeError:  # the loop closed meanwhile (the process is exiting)
            sending.close()
        return
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(group_for(event.stream), layer_message(event.as_message()))
    except Exception:
        logger.exception("could not publish %s live; readers will fetch it", event)


async def publish_message(message: dict) -> None:
    """Send a stored event (Event.as_message()) to its stream's subscribers, from an event
    loop. A failure only delays them (readers fill gaps from the table): logged, not raised."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        await layer.group_send(group_for(message["stream"]), layer_message(message))
    except Exception:
        logger.exception("could not publish event %s live", message.get("id"))
