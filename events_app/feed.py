"""Following one event stream: what a client missed from the table, then live events from the
channel layer, in seq order with no gap and no duplicate.

The WebSocket consumer and the SSE view both serve `follow_stream`. It joins its process's one
subscription to the stream (events_app.live_hub) before it reads the table, so an event
committed while the replay runs arrives live and is dropped as a duplicate rather than missed.
Live messages from two writer processes can overtake each other; seq numbers commit in order
and without holes (events_app.models.EventStream), so a message that skips ahead means the ones
in between are already in the table, and the feed reads them from there first. A big event
comes live as a reference (events_app.events.layer_message): the feed reads it, and anything
before it, from the table.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer

from events_app import selectors
from events_app.events import group_for
from events_app.live_hub import following

logger = logging.getLogger(__name__)

REPLAY_BATCH = 500
KEEPALIVE_SECONDS = 15.0


def parse_resume_point(raw: str | None) -> int | None:
    """The seq a client resumes after: a non-negative whole number, or None when not given.
    Raises ValueError, with a message for the client, on anything else."""
    if raw is None:
        return None
    raw = raw.strip()
    if not raw.isascii() or not raw.isdigit() or len(raw) > 18:  # 18 digits fit a bigint
        raise ValueError(f"expected a non-negative whole number, got {raw[:40]!r}")
    return int(raw)


@database_sync_to_async
def _messages_after(stream: str, after_seq: int, limit: int) -> list[dict]:
    # One query per batch; as_message() needs no further query, so it runs here too.
    events = selectors.events_after(stream=stream, after_seq=after_seq, limit=limit)
    return [event.as_message() for event in events]


class _NoLayer:
    """Stands in for the live side when no channel layer is configured: the feed then serves
    new events from the table at every keepalive interval."""

    async def next(self, timeout: float) -> None:
        await asyncio.sleep(timeout)


async def follow_stream(
    stream: str, after_seq: int, *, keepalive: float = KEEPALIVE_SECONDS, layer=None
) -> AsyncIterator[dict | None]:
    """Yield the events of `stream` after `after_seq` (each `Event.as_message()`), oldest
    first, then every new one as it commits; yield None after `keepalive` seconds without
    an event so the caller can keep its connection alive. Runs until closed."""
    layer = layer if layer is not None else get_channel_layer()
    if layer is None:
        async with contextlib.aclosing(_follow(stream, after_seq, keepalive, _NoLayer())) as feed:
            async for message in feed:
                yield message
        return
    # Joined before the replay: nothing falls in between.
    async with (
        following(layer, group_for(stream)) as live,
        contextlib.aclosing(_follow(stream, after_seq, keepalive, live)) as feed,
    ):
        async for message in feed:
            yield message


async def _follow(stream: str, last: int, keepalive: float, live) -> AsyncIterator[dict | None]:
    async with contextlib.aclosing(_from_table(stream, last)) as replay:
        async for message in replay:
            last = message["id"]
            yield message
    while True:
        message = await live.next(keepalive)
        if _read_table_first(message, last):
            # Overtaken (the events in between are committed: read them), a big event
            # sent by reference (read it), or quiet for a while (publishing is best
            # effort, the table is the truth: look there).
            async with contextlib.aclosing(_from_table(stream, last)) as missed:
                async for earlier in missed:
                    last = earlier["id"]
                    yield earlier
        if message is None:
            yield None
        elif message.get("reference"):
            if message["id"] > last:  # only if its row was deleted from the table
                logger.warning("%s: seq %s sent live, not in the table", stream, message["id"])
        elif message["id"] > last:
            if message["id"] > last + 1:  # only if rows were deleted from the table
                logger.warning("%s: seq %s..%s missing", stream, last + 1, message["id"] - 1)
            last = message["id"]
            yield message
        # else: already sent, from the table or an earlier message


def _read_table_first(message: dict | None, last: int) -> bool:
    if message is None:
        return True
    return message["id"] > last + 1 or (bool(message.get("reference")) and message["id"] > last)


async def _from_table(stream: str, after_seq: int) -> AsyncIterator[dict]:
    """Everything after `after_seq` that is committed now, one query per batch."""
    while True:
        batch = await _messages_after(stream, after_seq, REPLAY_BATCH)
        for message in batch:
            after_seq = message["id"]
            yield message
        if len(batch) < REPLAY_BATCH:
            return
