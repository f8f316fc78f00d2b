"""`follow_stream` that outlasts a database outage: the WebSocket and SSE clients stay
connected while PostgreSQL restarts or is down, and carry on from the last event they got,
with no gap and no duplicate, once it answers again."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from common.db_outage import first_line, is_database_unavailable, retry_delays
from common.draining import until_draining
from events_app.feed import KEEPALIVE_SECONDS, follow_stream

logger = logging.getLogger(__name__)


def follow_steadily(
    stream: str, after_seq: int, *, keepalive: float = KEEPALIVE_SECONDS
) -> AsyncIterator[dict | None]:
    """Yield what follow_stream yields; when the database fails it, follow again from the
    last event yielded, with backoff, yielding None (a keepalive) while it is down. Any
    other failure ends the feed as before (the client reconnects), and so does the web
    process beginning to stop (common.draining)."""
    return until_draining(_follow_through_outages(stream, after_seq, keepalive))


async def _follow_through_outages(
    stream: str, after_seq: int, keepalive: float
) -> AsyncIterator[dict | None]:
    last = after_seq
    delays = None
    while True:
        try:
            async with contextlib.aclosing(
                follow_stream(stream, last, keepalive=keepalive)
            ) as feed:
                async for message in feed:
                    if message is not None:
                        last, delays = message["id"], None
                    yield message
        except asyncio.CancelledError:
            raise
        except Exception as error:
            if not is_database_unavailable(error):
                raise
            if delays is None:
                delays = retry_delays()
                logger.warning("%s feed: database unavailable (%s)", stream, first_line(error))
            yield None
            await asyncio.sleep(next(delays))
