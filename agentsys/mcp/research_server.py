"""The research-agent MCP server (issue 23, part 1), served over stdio to the LLM inside
OpenCode: `python -m agentsys.mcp.research_server --workdir DIR`.

The workdir tools (agentsys.mcp.workdir_tools: quick_bash, list_directory) and the run tools
(agentsys.mcp.run_tools: create_run, start_run, list_runs, get_run, tail_run_log, wait_run,
search_memory; agentsys.mcp.sweep_tools: create_sweep, get_sweep_rungs; agentsys.mcp.wait_tools:
wait_runs) through the REST API, with the token of the
research loop running in the workdir: read at each call from the credentials file the loop
writes
(agentsys.mcp.credentials), so the runs land in the loop's sweep with the loop as their
creator, a new loop's token takes effect without a restart, and with no loop running the run
tools say so. AGENTSYS_URL and AGENTSYS_API_TOKEN (with AGENTSYS_SWEEP_ID) set a fixed address
and token instead. A refusal is an MCP tool error that says why; nothing a caller sends
crashes the server.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Annotated

from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from pydantic import Field

from agentsys.mcp import command_reaper
from agentsys.mcp.approval_tools import add_approval_tools
from agentsys.mcp.arguments import PlainArgumentErrors
from agentsys.mcp.credentials import NoCredentials, read_credentials
from agentsys.mcp.run_tools import AgentSysAPI, add_run_tools
from agentsys.mcp.sweep_tools import add_sweep_tools
from agentsys.mcp.wait_tools import add_wait_tools
from agentsys.mcp.workdir_tools import (
    MAX_PAGE,
    MAX_TIMEOUT_S,
    ToolRefused,
    Workdir,
)
from agentsys.mcp.workdir_tools import list_directory as _list_directory
from agentsys.mcp.workdir_tools import quick_bash as _quick_bash


def build_server(
    workdir: str | os.PathLike,
    *,
    api: AgentSysAPI | None = None,
    sweep_id: str | Callable[[], str] = "",
    name: str = "research-agent",
    with_bash: bool = True,
    with_approvals: bool = False,
) -> FastMCP:
    """The server for `workdir`; with `api` (AgentSys's REST API and a token), the run tools
    too, the runs it makes joining `sweep_id`. Without `with_bash` (AgentSys served to any
    MCP client), no shell. `with_approvals` (a person's client, never a loop's model): the
    approval tools (agentsys.mcp.approval_tools) too."""
    root = Workdir.at(workdir)
    server = FastMCP(name, instructions=f"AgentSys's tools, confined to {root.root}.")
    if with_bash:
        _add_quick_bash(server, root)

    @server.tool
    def list_directory(
        path: Annotated[str, Field(description="Relative to the workdir")] = ".",
        include_hidden: bool = False,
        offset: Annotated[int, Field(ge=0)] = 0,
        limit: Annotated[int, Field(ge=1, le=MAX_PAGE)] = 1000,
    ) -> dict:
        """List one directory inside the workdir, sorted by name and paged: each entry's
        name, type (file, directory, symlink, other) and a file's size."""
        try:
            return _list_directory(root, path, include_hidden, offset, limit)
        except ToolRefused as refused:
            raise ToolError(str(refused)) from None

    if api is not None:
        add_run_tools(server, api, sweep_id=sweep_id, workdir=str(root.root))
        add_sweep_tools(server, api)
        add_wait_tools(server, api)
        if with_approvals:
            add_approval_tools(server, api)
    server.add_middleware(PlainArgumentErrors(server))
    return server


def client_server(workdir: str | os.PathLike, api: AgentSysAPI) -> FastMCP:
    """AgentSys as any MCP client gets it (`manage.py mcp`, `/mcp`), acting with the caller's
    token: the run tools and list_directory, no shell, and the approval tools a person uses
    (never on the server OpenCode's model gets: a loop must not approve its own spending)."""
    return build_server(workdir, api=api, name="agentsys", with_bash=False, with_approvals=True)


def _add_quick_bash(server: FastMCP, root: Workdir) -> None:
    @server.tool
    async def quick_bash(
        command: Annotated[str, Field(description="Shell text, run by /bin/sh -c")],
        workdir: Annotated[str, Field(description="A folder inside the workdir")] = ".",
        timeout_seconds: Annotated[float, Field(gt=0, le=MAX_TIMEOUT_S)] = 30.0,
    ) -> dict:
        """Run a short shell command in the workdir. On timeout the command and every
        process it started are killed. stdout and stderr are cut at 64 KiB each (the first
        kept); the result says how many bytes there were."""
        try:
            return await _quick_bash(root, command, workdir, timeout_seconds)
        except ToolRefused as refused:
            raise ToolError(str(refused)) from None


def loop_field(workdir: str | os.PathLike, name: str) -> Callable[[], str]:
    """A callable reading field `name` (url, token, sweep_id) of the credentials of the loop
    running in `workdir`, at each call; with no loop there (or a broken file), a tool error
    saying so."""

    def read() -> str:
        try:
            return getattr(read_credentials(workdir), name)
        except NoCredentials as missing:
            raise ToolError(str(missing)) from None

    return read


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", default=os.environ.get("AGENTSYS_WORKDIR") or os.getcwd())
    args = parser.parse_args(argv)
    url, token = os.environ.get("AGENTSYS_URL", ""), os.environ.get("AGENTSYS_API_TOKEN", "")
    if token:  # a fixed token (a script's, a person's): it needs the address too
        api = AgentSysAPI(url, token) if url else None
        sweep: str | Callable[[], str] = os.environ.get("AGENTSYS_SWEEP_ID", "")
    else:  # the research loop running in the workdir, whichever it is at each call
        url_now, token_now = loop_field(args.workdir, "url"), loop_field(args.workdir, "token")
        api, sweep = AgentSysAPI(url_now, token_now), loop_field(args.workdir, "sweep_id")
    server = build_server(args.workdir, api=api, sweep_id=sweep)
    # No quick_bash command outlives its server (agentsys.mcp.command_reaper): those of a
    # server killed outright go now, this one's go when it is stopped or its client leaves.
    command_reaper.kill_orphans()
    command_reaper.stop_on_signals()
    try:
        server.run(show_banner=False)
    finally:
        command_reaper.kill_live_commands()


if __name__ == "__main__":
    main()
