"""The research loop's way to its model: one OpenCode session per loop (kept across
iterations and restarts, so the model keeps its context), each prompt a fresh event stream.

`ModelGateway` is what the loop needs; `OpenCodeGateway` is the real one. Failures arrive as
`agentsys.opencode.OpenCodeError`s that say what went wrong; the loop records them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Protocol

from agentsys.opencode import OpenCodeClient, OpenCodeError, Timeouts

TOOL_OUTPUT_CHARS = 2000  # of each tool call's output, kept in the loop's history
TOOL_INPUT_CHARS = 1000
# Before each prompt: is an MCP server down (to start it again)? Bounded: a server that never
# answers would otherwise hold every prompt of every loop (OpenCode waits up to the entry's
# 330 s timeout on it). A server starts in about 2 s on a quiet 2-core machine, over 10 s on a
# very busy one; a deployment that is slow to start its servers sets the gateway's own bound.
MCP_CHECK_SECONDS = 10.0

logger = logging.getLogger("agentsys.research")


@dataclass(frozen=True)
class ModelReply:
    text: str
    model_s: float  # seconds the model (and OpenCode) took
    # The tools it called on the way (its MCP servers' and OpenCode's own), as the loop's
    # page shows them: {"tool", "status", "title", "input", "output"}.
    tool_calls: list[dict] = field(default_factory=list)
    finish: str = ""  # the provider's finish reason: "length" is a reply cut off
    steps: list[dict] = field(default_factory=list)  # its paid steps, for the ledger


def tool_parts(calls: list[dict]) -> list[dict]:
    """OpenCode's tool parts, small enough to keep in the loop's state for good."""
    parts = []
    for call in calls:
        given = call.get("input")
        text = json.dumps(given, default=str) if given is not None else ""
        parts.append(
            {
                "tool": str(call.get("tool") or "tool"),
                "status": str(call.get("status") or ""),
                "title": str(call.get("title") or "")[:200],
                "input": given if len(text) <= TOOL_INPUT_CHARS else text[:TOOL_INPUT_CHARS] + "…",
                "output": _cut(str(call.get("output") or ""), TOOL_OUTPUT_CHARS),
            }
        )
    return parts


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"… ({len(text) - limit} more characters)"


class ModelGateway(Protocol):
    async def ensure_session(self, session_id: str) -> str: ...
    async def ask(self, session_id: str, text: str) -> ModelReply: ...
    async def abort(self, session_id: str) -> None: ...
    async def aclose(self) -> None: ...
    async def release_workdir(self) -> None: ...
    async def session_steps(self, session_id: str) -> list[dict]: ...


class OpenCodeGateway:
    def __init__(
        self,
        *,
        url: str,
        provider: str,
        model: str,
        workdir: str,
        title: str,
        timeouts: Timeouts | None = None,
        username: str = "",
        password: str = "",
        mcp_check_seconds: float = MCP_CHECK_SECONDS,
    ):
        self.client = OpenCodeClient(
            url, username=username, password=password, timeouts=timeouts, directory=workdir
        )
        self.provider, self.model, self.workdir, self.title = provider, model, workdir, title
        self.mcp_check_seconds = mcp_check_seconds

    async def ensure_session(self, session_id: str) -> str:
        if session_id:
            return session_id
        return await self.client.create_session(self.workdir, title=self.title)

    async def ask(self, session_id: str, text: str) -> ModelReply:
        started = time.monotonic()
        try:  # bounded: a first look at a directory starts its servers (seconds)
            await asyncio.wait_for(self.reconnect_failed_mcp_servers(), self.mcp_check_seconds)
        except TimeoutError:
            said = "MCP servers not checked: OpenCode took over %ss"
            logger.warning(said, self.mcp_check_seconds)
        result = await self.client.prompt(
            session_id, text, provider=self.provider, model=self.model, directory=self.workdir
        )
        return ModelReply(
            text=result.text,
            model_s=time.monotonic() - started,
            tool_calls=tool_parts(result.tool_calls),
            finish=result.finish,
            steps=result.steps,
        )

    async def reconnect_failed_mcp_servers(self) -> list[str]:
        """Start again the workdir's MCP servers OpenCode says failed (one killed mid-call
        stays down, its tools gone from every later prompt, until someone connects it);
        returns their names. Never in the prompt's way: trouble here is only logged."""
        try:
            servers = await self.client.mcp_status(self.workdir)
            failed = [
                name
                for name, state in servers.items()
                if isinstance(state, dict) and state.get("status") == "failed"
            ]
            for name in failed:
                connected = await self.client.mcp_connect(name, self.workdir)
                logger.info("MCP server %s had failed; reconnected: %s", name, connected)
            return failed
        except OpenCodeError as error:
            logger.warning("could not check OpenCode's MCP servers: %s", error)
            return []

    async def abort(self, session_id: str) -> None:
        if session_id:
            await self.client.abort(session_id, self.workdir)

    async def release_workdir(self) -> None:
        """For a loop that is over, in a worktree no one else works in: OpenCode stops the MCP
        servers it started there and drops what it held of it."""
        await self.client.dispose_directory(self.workdir)

    async def session_steps(self, session_id: str) -> list[dict]:
        """Every step the session paid for, as OpenCode keeps them (for the ledger)."""
        return await self.client.session_steps(session_id, self.workdir) if session_id else []

    async def aclose(self) -> None:
        await self.client.aclose()


__all__ = ["ModelGateway", "ModelReply", "OpenCodeError", "OpenCodeGateway"]
