"""Whether this web process is stopping, for the code that serves open-ended responses.

An event stream (SSE, the NDJSON chat stream, a WebSocket) has no end of its own: left alone it
is cut mid-chunk when the server stops, and a client cannot tell a stopped server from a lost
network. When the web process begins to stop (researchagent.webserver), every stream wrapped in
`until_draining` ends where it is, so its response finishes properly (the chunked body's last
chunk, a WebSocket close frame) and the client resumes from the last id it saw once a server
answers again.

One flag per process, and the streams reading now per event loop, because test runners serve
consumers from several loops in one process.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator
from typing import TypeVar

T = TypeVar("T")

_draining = False
# Per event loop, the streams reading now: each a callback that ends its stream.
_streams: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, set] = weakref.WeakKeyDictionary()


def is_draining() -> bool:
    return _draining


def begin_draining() -> None:
    """Tell every stream of this process to end. Safe from any thread or a signal handler."""
    global _draining
    _draining = True
    for loop, streams in list(_streams.items()):
        if not loop.is_closed():
            for end in list(streams):
                loop.call_soon_threadsafe(end)


def reset() -> None:
    """For tests that drain and then serve again in the same process."""
    global _draining
    _draining = False


class _Stream:
    """One stream's part in draining: while it waits on its source, draining cancels that
    wait (its task, at the wait); between items it only marks it, and the stream ends
    before its next read. Cheaper than racing every read against a draining event: that
    made a task and a wait per item, for every client of every event."""

    def __init__(self) -> None:
        self.task = asyncio.current_task()
        self.reading = False
        self.drained = False

    def end(self) -> None:
        self.drained = True
        if self.reading and self.task is not None:
            self.task.cancel()

    def cancelled_by_draining(self) -> bool:
        """Whether the CancelledError at hand is draining's alone (then it is absorbed)."""
        return self.drained and self.task is not None and self.task.uncancel() == 0


async def until_draining(source: AsyncIterator[T]) -> AsyncIterator[T]:
    """Yield what `source` yields until it ends or the process begins to drain; then close
    `source` (its `finally` blocks run: channel-layer groups are left, cursors closed)."""
    stream = _Stream()
    streams = _streams.setdefault(asyncio.get_running_loop(), set())
    streams.add(stream.end)
    try:
        while not (_draining or stream.drained):
            stream.reading = True
            try:
                item = await anext(source)
            except StopAsyncIteration:
                return
            except asyncio.CancelledError:
                if stream.cancelled_by_draining():
                    return
                raise
            finally:
                stream.reading = False
            yield item
    finally:
        streams.discard(stream.end)
        if hasattr(source, "aclose"):
            await source.aclose()
