"""One channel-layer subscription per stream in a web process, shared by every WebSocket and
SSE client following that stream there.

A subscription per client made the channel layer store and NOTIFY each event once per client:
channels-postgres inserts a row, and PostgreSQL sends a notification every web process parses,
for each channel in the group. With 1,000 clients on the agent feed that was 1,000 rows and
1,000 notifications an event, and clients got events seconds late. Now the layer has one
channel per stream per web process; the process hands each message to every local follower's
queue.

Order and completeness are the layer's, as before: a follower joins a subscription that is
already listening before it reads the table, and a message reaches the hub only after its
event committed, so an event either comes live to the follower or is in its table read.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator

from events_app.events import MESSAGE_TYPE

logger = logging.getLogger(__name__)

LISTEN_WAIT_SECONDS = 5.0  # at most, for the layer to listen before a follower reads the table


class Follower:
    """What one client's feed reads: the live events of its stream, from when it joined."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[dict | BaseException] = asyncio.Queue()

    def put(self, item: dict | BaseException) -> None:
        self._queue.put_nowait(item)

    async def next(self, timeout: float) -> dict | None:
        """The next live event, or None after `timeout` seconds without one. Raises what
        ended the subscription (the feed ends with it; its client reconnects)."""
        if self._queue.empty():
            try:  # not wait_for: it made a task for every event every client waited on
                async with asyncio.timeout(timeout):
                    item = await self._queue.get()
            except TimeoutError:
                return None
        else:
            item = self._queue.get_nowait()
        if isinstance(item, BaseException):
            raise item
        return item


class _Subscription:
    """One channel in a stream's group, read by one task that copies each message to every
    follower."""

    def __init__(self, layer, group: str) -> None:
        self.layer = layer
        self.group = group
        self.followers: set[Follower] = set()
        self.channel: str | None = None
        self.failed = False
        self.loop = asyncio.get_running_loop()
        self._reader: asyncio.Task | None = None
        self.started = asyncio.ensure_future(self._start())

    async def _start(self) -> None:
        try:
            self.channel = await self.layer.new_channel()
            await self.layer.group_add(self.group, self.channel)
        except BaseException:
            self.failed = True  # the next follower makes a new one
            raise
        self._reader = asyncio.create_task(self._read(), name=f"live-hub {self.group}")
        await _listening(self.layer)

    async def _read(self) -> None:
        try:
            while True:
                message = await self.layer.receive(self.channel)
                event = message.get("event")
                if message.get("type") == MESSAGE_TYPE and isinstance(event, dict):
                    for follower in tuple(self.followers):
                        follower.put(event)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # every follower's feed ends with it; the next joins anew
            self.failed = True
            for follower in tuple(self.followers):
                follower.put(error)

    async def close(self) -> None:
        if not self.started.done():
            self.started.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self.started
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        if self.channel is not None:
            try:
                await self.layer.group_discard(self.group, self.channel)
            except Exception:  # its followers are gone either way; do not mask why
                logger.exception("could not leave %s", self.group)


# (event loop, layer, group) → its subscription: a test may run several loops in one process.
_subscriptions: dict[tuple[int, int, str], _Subscription] = {}


@contextlib.asynccontextmanager
async def following(layer, group: str) -> AsyncIterator[Follower]:
    """A follower of `group`'s live messages for as long as the block runs, on this process's
    one subscription to it (made by the first follower, left by the last)."""
    loop = asyncio.get_running_loop()
    key = (id(loop), id(layer), group)
    subscription = _subscriptions.get(key)
    # A loop's id may be a closed loop's, whose subscription no follower left (a test's).
    if subscription is None or subscription.failed or subscription.loop is not loop:
        subscription = _subscriptions[key] = _Subscription(layer, group)
    follower = Follower()
    subscription.followers.add(follower)
    try:
        await asyncio.shield(subscription.started)
        yield follower
    finally:
        subscription.followers.discard(follower)
        if not subscription.followers:
            if _subscriptions.get(key) is subscription:
                del _subscriptions[key]
            await subscription.close()


# The newest live messages' JSON, by the message object (kept here, so its id is not reused):
# every follower of a live event is handed the same dict and sends the same text.
_texts: OrderedDict[int, tuple[dict, str]] = OrderedDict()
TEXTS_KEPT = 256


def message_text(message: dict) -> str:
    """`message` (an Event.as_message()) as compact JSON, encoded once in this process for
    all the clients that send it (1,000 sockets on one feed encoded each event 1,000 times)."""
    kept = _texts.get(id(message))
    if kept is not None and kept[0] is message:
        return kept[1]
    text = json.dumps(message, separators=(",", ":"))
    _texts[id(message)] = (message, text)
    if len(_texts) > TEXTS_KEPT:
        _texts.popitem(last=False)
    return text


def subscriptions() -> int:
    """How many subscriptions this process holds (for tests and figures)."""
    return len(_subscriptions)


async def _listening(layer) -> None:
    """channels-postgres starts to LISTEN at a process's first receive(), reading the messages
    already queued just before; one sent between that read and the LISTEN is never delivered
    (a busy database widens the gap to seconds). Wait, a bounded while, until it listens: the
    table read that follows then holds every event sent before, and every later one comes
    live. Other layers deliver from the subscription on: nothing to wait for."""
    if not hasattr(layer, "listen_to_all_channels"):
        return
    loop = asyncio.get_running_loop()
    deadline = loop.time() + LISTEN_WAIT_SECONDS
    while loop.time() < deadline:
        ready = getattr(layer, "listener_task_is_running", None)
        if isinstance(ready, asyncio.Event) and ready.is_set():
            return
        await asyncio.sleep(0.01)
    logger.warning("the channel layer did not listen within %ss", LISTEN_WAIT_SECONDS)
