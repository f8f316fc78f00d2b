"""The live half of the event log inside runagentd: publishing from its event loop, and the
start-up check that the channel layer really delivers."""

from __future__ import annotations

import asyncio
import logging

from channels.layers import get_channel_layer
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from agents_app.events import MESSAGE_TYPE, group_for

logger = logging.getLogger(__name__)


async def publish(message: dict) -> None:
    """Send a stored event (Event.as_message()) to its stream's subscribers. A failure only
    delays them (readers fill gaps from the table), so it is logged, not raised."""
    layer = get_channel_layer()
    try:
        await layer.group_send(
            group_for(message["stream"]), {"type": MESSAGE_TYPE, "event": message}
        )
    except Exception:
        logger.exception("could not publish event %s live", message.get("id"))


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
    try:
        channel = await layer.new_channel()
        await layer.send(channel, {"type": "agentsys.ping"})
        reply = await asyncio.wait_for(layer.receive(channel), timeout)
    except Exception as exc:
        raise ImproperlyConfigured(
            f"CHANNEL_LAYER={choice}: a test message did not come back ({exc!r})"
        ) from exc
    if reply.get("type") != "agentsys.ping":
        raise ImproperlyConfigured(f"CHANNEL_LAYER={choice}: got {reply!r} back")
