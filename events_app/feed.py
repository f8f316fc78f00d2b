"""Following one event stream: what a client missed from the table, then live events from the
channel layer, in seq order with no gap and no duplicate.

The WebSocket consumer and the SSE view both serve `follow_stream`. It subscribes before it
reads the table, so an event committed while the replay runs arrives live and is dropped as a
duplicate rather than missed. Live messages from two writer processes can overtake each other;
seq numbers commit in order and without holes (events_app.models.EventStream), so a message
that skips ahead means the ones in between are already in the table, and the feed reads them
from there first. A big event comes live as a reference (events_app.events.layer_message): the
feed reads it, and anything before it, from the table.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from channels.db import database_sync_to_async
from channels.layers import get_channel_layer

from events_app import selectors
from events_app.events import MESSAGE_TYPE, group_for

logger = logging.getLogger(__name__)

REPLAY_BATCH = 500
KEEPALIVE_SECONDS = 15.0
LISTEN_WAIT_SECONDS = 5.0  # at most, for the layer to listen before the table is read


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


class _LiveMessages:
    """The events a channel-layer channel receives, read in the background from the moment
    the feed subscribes, so none is lost while the feed is busy with the table or the client."""

    def __init__(self, layer, channel: str):
        self._layer = layer
        self._channel = channel
        self._queue: asyncio.Queue[dict | BaseException] = asyncio.Queue()
        self._reader = asyncio.create_task(self._read(), name=f"feed-reader {channel}")

    async def _read(self) -> None:
        try:
            while True:
                message = await self._layer.receive(self._channel)
                if message.get("type") == MESSAGE_TYPE and isinstance(message.get("event"), dict):
                    self._queue.put_nowait(message["event"])
        except asyncio.CancelledError:
            raise
        except Exception as error:  # hand the failure to the feed, which ends with it
            self._queue.put_nowait(error)

    async def next(self, timeout: float) -> dict | None:
        """The next live event, or None after `timeout` seconds without one."""
        try:
            item = await asyncio.wait_for(self._queue.get(), timeout)
        except TimeoutError:
            return None
        if isinstance(item, BaseException):
            raise item
        return item

    async def close(self) -> None:
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader


class _NoLayer:
    """Stands in for the live side when no channel layer is configured: the feed then serves
    new events from the table at every keepalive interval."""

    async def next(self, timeout: float) -> None:
        await asyncio.sleep(timeout)

    async def close(self) -> None:
        return None


async def follow_stream(
    stream: str, after_seq: int, *, keepalive: float = KEEPALIVE_SECONDS, layer=None
) -> AsyncIterator[dict | None]:
    """Yield the events of `stream` after `after_seq` (each `Event.as_message()`), oldest
    first, then every new one as it commits; yield None after `keepalive` seconds without
    an event so the caller can keep its connection alive. Runs until closed."""
    layer = layer if layer is not None else get_channel_layer()
    group = group_for(stream)
    channel = None
    if layer is not None:
        channel = await layer.new_channel()
        await layer.group_add(group, channel)  # before the replay: nothing falls in between
    live = _LiveMessages(layer, channel) if layer is not None else _NoLayer()
    last = after_seq
    try:
        await _listening(layer)
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
    finally:
        await live.close()
        if layer is not None:
            try:
                await layer.group_discard(group, channel)
            except Exception:  # the client is gone either way; do not mask why
                logger.exception("could not leave %s", group)


async def _listening(layer) -> None:
    """channels-postgres starts to LISTEN at a process's first receive(), reading the messages
    already queued just before; one sent between that read and the LISTEN is never delivered
    (a busy database widens the gap to seconds). Wait, a bounded while, until it listens: the
    table read that follows then holds every event sent before, and every later one comes
    live. Other layers deliver from the subscription on: nothing to wait for."""
    if layer is None or not hasattr(layer, "listen_to_all_channels"):
        return
    loop = asyncio.get_running_loop()
    deadline = loop.time() + LISTEN_WAIT_SECONDS
    while loop.time() < deadline:
        ready = getattr(layer, "listener_task_is_running", None)
        if isinstance(ready, asyncio.Event) and ready.is_set():
            return
        await asyncio.sleep(0.01)
    logger.warning("the channel layer did not listen within %ss", LISTEN_WAIT_SECONDS)


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
