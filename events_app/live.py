"""The start-up check, inside runagentd, that the channel layer really delivers."""

from __future__ import annotations

import asyncio
import logging

from channels.layers import get_channel_layer
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from common.db_outage import first_line, is_database_unavailable, retry_delays

logger = logging.getLogger(__name__)


async def verify_channel_layer(timeout: float = 5.0) -> None:
    """Send a message through the configured layer and read it back. get_channel_layer()
    returns None on some configuration errors instead of raising; this makes them loud."""
    choice = settings.AGENTSYS.channel_layer
    if choice == "memory":
        raise ImproperlyConfigured(
            "CHANNEL_LAYER=memory works inside one process only, so runagentd's events could "
            "never reach the web server; use postgres (the default) or redis"
        )
    layer = get_channel_layer()
    if layer is None:
        raise ImproperlyConfigured(
            f"CHANNEL_LAYER={choice}: the channel layer could not be created; check its "
            "settings (for postgres: NAME, USER, PASSWORD, HOST, PORT and TIME_ZONE)"
        )
    delays = None
    while True:
        try:
            channel = await layer.new_channel()
            await layer.send(channel, {"type": "agentsys.ping"})
            reply = await asyncio.wait_for(layer.receive(channel), timeout)
            break
        except Exception as exc:
            # A database that is down (restarting) is waited for: runagentd started by a
            # supervisor during an outage comes up once it is back, not with a wrong cause.
            if choice != "postgres" or not is_database_unavailable(exc):
                raise ImproperlyConfigured(
                    f"CHANNEL_LAYER={choice}: a test message did not come back ({exc!r})"
                ) from exc
            if delays is None:
                delays = retry_delays()
                logger.warning("database unavailable (%s); waiting for it", first_line(exc))
            await asyncio.sleep(next(delays))
    if reply.get("type") != "agentsys.ping":
        raise ImproperlyConfigured(f"CHANNEL_LAYER={choice}: got {reply!r} back")
