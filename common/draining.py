"""Whether this web process is stopping, for the code that serves open-ended responses.

An event stream (SSE, the NDJSON chat stream, a WebSocket) has no end of its own: left alone it
is cut mid-chunk when the server stops, and a client cannot tell a stopped server from a lost
network. When the web process begins to stop (researchagent.webserver), every stream wrapped in
`until_draining` ends where it is, so its response finishes properly (the chunked body's last
chunk, a WebSocket close frame) and the client resumes from the last id it saw once a server
answers again.

One flag per process; one asyncio.Event per event loop, because test runners serve consumers
from several loops in one process.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import AsyncIterator
from typing import TypeVar

T = TypeVar("T")

_draining = False
_events: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Event] = (
    weakref.WeakKeyDictionary()
)


def is_draining() -> bool:
    return _draining


def begin_draining() -> None:
    """Tell every stream of this process to end. Safe from any thread or a signal handler."""
    global _draining
    _draining = True
    for loop, event in list(_events.items()):
        if not loop.is_closed():
            loop.call_soon_threadsafe(event.set)


def reset() -> None:
    """For tests that drain and then serve again in the same process."""
    global _draining
    _draining = False
    for event in list(_events.values()):
        event.clear()


def _event() -> asyncio.Event:
    loop = asyncio.get_running_loop()
    event = _events.get(loop)
    if event is None:
        event = _events[loop] = asyncio.Event()
        if _draining:
            event.set()
    return event


async def until_draining(source: AsyncIterator[T]) -> AsyncIterator[T]:
    """Yield what `source` yields until it ends or the process begins to drain; then close
    `source` (its `finally` blocks run: channel-layer groups are left, cursors closed)."""
    stop = asyncio.ensure_future(_event().wait())
    step: asyncio.Future | None = None
    try:
        while True:
            step = asyncio.ensure_future(anext(source))
            await asyncio.wait({step, stop}, return_when=asyncio.FIRST_COMPLETED)
            if not step.done():
                return  # draining
            try:
                item = step.result()
            except StopAsyncIteration:
                return
            step = None
            yield item
    finally:
        stop.cancel()
        if step is not None and not step.done():  # drained, or this consumer was cancelled
            step.cancel()
            with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                await step
        if hasattr(source, "aclose"):
            await source.aclose()
