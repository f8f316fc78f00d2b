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

from agentsys.mcp import command_reaper, workdir_tools
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


def test_a_stop_between_the_fork_and_the_spawns_return_kills_the_command(tmp_path, monkeypatch):
    """The stop can land while the server still awaits the spawn: the command already runs
    (a loaded machine made this window seconds long), and it must still be found and killed."""
    mark = f"100.{secrets.randbelow(10**9)}"
    spawn = asyncio.create_subprocess_exec

    async def spawn_then_stop(*args, **kwargs):
        process = await spawn(*args, **kwargs)
        await asyncio.to_thread(wait_until, lambda: processes_with(mark), 30, message="sleep")
        command_reaper.kill_live_commands()  # what the SIGTERM handler runs
        await asyncio.to_thread(
            wait_until, lambda: not processes_with(mark), 10, message="the command to be killed"
        )
        return process

    monkeypatch.setattr(workdir_tools.asyncio, "create_subprocess_exec", spawn_then_stop)
    try:
        result = asyncio.run(
            workdir_tools.quick_bash(workdir_tools.Workdir.at(tmp_path), f"sleep {mark}", ".", 60)
        )
        assert result["exit_code"] == -signal.SIGKILL, result
    finally:
        kill_all(processes_with(mark))
