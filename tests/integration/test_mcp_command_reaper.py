"""No quick_bash command outlives the research-agent MCP server that ran it
(agentsys.mcp.command_reaper): a server stopped mid-call (OpenCode stops one with SIGTERM)
kills its commands on its way out, and the next server to start kills those of a server that
was killed outright."""

import asyncio
import secrets
import signal
import sys

import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport

from tests.helpers import REPO, wait_until
from tests.mcp_opencode import kill_all, processes_with, research_servers

pytestmark = pytest.mark.slow


def _server(workdir):
    args = ["-m", "agentsys.mcp.research_server", "--workdir", str(workdir)]
    return Client(StdioTransport(sys.executable, args, cwd=str(REPO)))


async def _call_until_killed(workdir, mark: str, sig: int) -> None:
    """A quick_bash whose command runs `sleep <mark>` in the background and in front; the
    server gets `sig` while it runs."""
    command = f"sleep {mark} & setsid sleep {mark} & sleep {mark}"
    async with _server(workdir) as client:
        call = asyncio.create_task(
            client.call_tool("quick_bash", {"command": command, "timeout_seconds": 100})
        )
        await asyncio.to_thread(
            wait_until, lambda: len(processes_with(mark)) >= 3, 30, message="the sleeps"
        )
        [server] = research_servers(workdir)
        server.send_signal(sig)
        with pytest.raises(Exception):  # noqa: B017 - the transport's own error: the server left
            await asyncio.wait_for(call, 30)


def test_a_server_stopped_mid_call_takes_its_command_with_it(tmp_path):
    mark = f"100.{secrets.randbelow(10**9)}"
    try:
        asyncio.run(_call_until_killed(tmp_path, mark, signal.SIGTERM))
        wait_until(lambda: not processes_with(mark), 5, message="the command to be killed")
    finally:
        kill_all(processes_with(mark))


def test_the_next_server_kills_what_a_killed_one_left(tmp_path):
    mark = f"100.{secrets.randbelow(10**9)}"
    try:
        asyncio.run(_call_until_killed(tmp_path, mark, signal.SIGKILL))
        # Killed outright, it could do nothing: its command runs on, answering to no one.
        assert len(processes_with(mark)) >= 3

        async def start_another():
            async with _server(tmp_path) as client:
                await client.list_tools()

        asyncio.run(start_another())
        wait_until(lambda: not processes_with(mark), 5, message="the orphans to be killed")
    finally:
        kill_all(processes_with(mark))
