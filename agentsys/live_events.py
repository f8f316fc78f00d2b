"""runagentd's live events, sent in the order they were stored and off the path of the work
that stored them.

A live send is two round trips to the channel layer's database. runagentd awaited each one
where it stored the event: a claimed executor launched only after its `started` event had
gone out, and every start and end of a run waited on it (issue 25: ~3 ms of each). Sending
from one queue keeps their order (one sender, first in first out); a send that fails, or one
still queued when runagentd stops, only delays readers: they fill any gap from the table.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

logger = logging.getLogger("agentsys.daemon")


class LiveEvents:
    """`await live(event)` queues the event and returns at once."""

    def __init__(self, send: Callable[[dict], Awaitable]):
        self._send = send
        self._queue: asyncio.Queue[dict] = asyncio.Queue()
        self._sender: asyncio.Task | None = None

    async def __call__(self, event: dict) -> None:
        self._queue.put_nowait(event)
        if self._sender is None or self._sender.done():
            self._sender = asyncio.create_task(self._send_queued(), name="live-events")

    async def _send_queued(self) -> None:
        while True:
            event = await self._queue.get()
            try:
                await self._send(event)
            except Exception:  # the send logs its own failures; never stop the sender
                logger.exception("could not send event %s live", event.get("id"))
            finally:
                self._queue.task_done()

    async def flush(self, timeout: float) -> None:
        """Send what is queued, for at most `timeout` seconds, then stop the sender."""
        try:
            await asyncio.wait_for(self._queue.join(), timeout)
        except TimeoutError:
            logger.warning("%d event(s) not sent live at the stop", self._queue.qsize())
        if self._sender is not None:
            self._sender.cancel()
