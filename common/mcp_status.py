"""The MCP servers OpenCode runs for AGENTSYS_WORKDIR, as OpenCode reports them (GET /mcp):
shown by `/api/health`, its banner and the settings page.

The banner polls /api/health every few seconds: an answer is kept for a few seconds, and the
question has a short timeout, so neither a slow nor a dead OpenCode slows a page."""

from __future__ import annotations

import time

from django.conf import settings

from agentsys.mcp.status import trouble, workdir_mcp_status

MCP_TIMEOUT_SECONDS = 1.5
KEEP_SECONDS = 5.0
_answers: dict[tuple[str, str], tuple[float, dict]] = {}


async def mcp_check(*, opencode_ok: bool = True) -> dict:
    """Each MCP server of the workdir (connected, failed with its error and fix); not asked
    while OpenCode itself is not answering (its own check says so)."""
    config = settings.AGENTSYS
    workdir = str(settings.AGENTSYS_WORKDIR)
    if not opencode_ok or not config.opencode_url:
        return {"ok": False, "directory": workdir, "error": "not asked: OpenCode is not answering"}
    key = (config.opencode_url, workdir)
    kept = _answers.get(key)
    if kept is not None and time.monotonic() - kept[0] < KEEP_SECONDS:
        return kept[1]
    answer = await workdir_mcp_status(
        config.opencode_url,
        workdir,
        username=config.opencode_username,
        password=config.opencode_password,
        timeout=MCP_TIMEOUT_SECONDS,
    )
    _answers[key] = (time.monotonic(), answer)
    return answer


def mcp_warnings(check: dict) -> list[str]:
    """The health warnings of a check: each server in trouble with its one-line fix."""
    if check.get("error", "").startswith("not asked"):
        return []
    return trouble(check)


def forget() -> None:
    """Drop the kept answers (a test that changes what OpenCode would say)."""
    _answers.clear()
