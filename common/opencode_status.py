"""Whether agents can reach their model: the configured OpenCode server asked for its health.
Shown by `/api/health`, its banner and the settings page."""

from __future__ import annotations

from django.conf import settings

from agentsys.opencode.client import server_health

OPENCODE_TIMEOUT_SECONDS = 1.0


async def opencode_check() -> dict:
    """OpenCode's answer, its version and the configured model; or why it cannot be asked."""
    config = settings.AGENTSYS
    found = {"url": config.opencode_url, "model": f"{config.model_provider}/{config.model_id}"}
    answer = await server_health(
        config.opencode_url,
        username=config.opencode_username,
        password=config.opencode_password,
        timeout=OPENCODE_TIMEOUT_SECONDS,
    )
    return {**found, **answer}
