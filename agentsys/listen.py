"""runagentd's LISTEN connection: NOTIFY on these channels wakes the daemon at once for new
work, commands and freed GPUs, so nothing waits for the fallback poll."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

logger = logging.getLogger("agentsys.daemon")

# The NOTIFY channels that wake runagentd; the apps send on them at commit.
COMMANDS_CHANNEL = "agentsys_commands"  # a command (stop, pause, steer) for an agent
AGENTS_CHANNEL = "agentsys_agents"  # an agent to start, or a chat turn to answer
QUEUE_CHANNEL = "agentsys_queue"  # executor work queued, or GPUs freed
WAKE_CHANNELS = (COMMANDS_CHANNEL, AGENTS_CHANNEL, QUEUE_CHANNEL)
DB_RETRY_FIRST = 0.1  # seconds; doubled after each failure...
DB_RETRY_MAX = 1.0  # ...up to this: everything resumes within about a second of the DB


async def listen_for_work(
    dsn: str | None,
    wake: asyncio.Event,
    stopping: asyncio.Event,
    heard: Callable[[str | None], None] | None = None,
) -> None:
    """Set `wake` on every notification until `stopping`; reconnect on failure (a restarted
    database) with backoff, saying so once per outage. No dsn: nothing to do (poll only).
    `heard` is told each notification's channel first (None: anything may have been missed,
    as after connecting), so the daemon looks only where there is news."""
    heard = heard or _ignore
    if not dsn:
        return
    import psycopg

    delay, lost = DB_RETRY_FIRST, False
    while not stopping.is_set():
        try:
            async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
                for channel in WAKE_CHANNELS:
                    await conn.execute(f"LISTEN {channel}")
                if lost:
                    logger.info("LISTEN connection back")
                delay, lost = DB_RETRY_FIRST, False
                heard(None)  # catch up on what arrived while we were not listening
                wake.set()
                async for notification in conn.notifies():
                    heard(notification.channel)
                    wake.set()
        except asyncio.CancelledError:
            raise
        except Exception as error:
            if not lost:
                gist = (str(error).strip().splitlines() or [type(error).__name__])[0]
                logger.warning("LISTEN connection lost (%s); reconnecting", gist)
            lost = True
            await asyncio.sleep(delay)
            delay = min(delay * 2, DB_RETRY_MAX)


def _ignore(channel: str | None) -> None:
    return None
