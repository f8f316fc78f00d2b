"""`manage.py serve`'s MCP steps (issue 23, part 3): before OpenCode starts, AgentSys's MCP
servers are merged into the workdir's opencode.json; once it answers, what OpenCode made of
each server is said on the console, a failed one with its fix.

Only the workdir tools go in the file (quick_bash, list_directory; SLURM's where `sbatch` is
installed): the workdir is a repository the research loop commits, so no token is written
there, and the run tools (which need one) stay off.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from agentsys.mcp.opencode_config import CONFIG_FILE, ConfigRefused, merge_servers, server_entries
from agentsys.mcp.status import RECONFIGURE, trouble, workdir_mcp_status

START_WAIT_SECONDS = 30.0  # a cold workdir's Python MCP servers start in ~5 s on 2 cores
TRY_SECONDS = 2.0


def wire_workdir(workdir: Path) -> str:
    """Merge AgentSys's servers into `workdir`'s opencode.json; one console line saying what
    was added, updated or already up to date, or why the file was left alone."""
    path = Path(workdir) / CONFIG_FILE
    entries = server_entries(Path(workdir), slurm=shutil.which("sbatch") is not None)
    try:
        said = merge_servers(workdir, entries)
    except ConfigRefused as refused:
        return f"MCP servers not added: {refused} (fix it, then `{RECONFIGURE}`)"
    except OSError as error:
        return f"MCP servers not added: {path} cannot be written ({error})"
    return f"MCP servers in {path}: {', '.join(said)}"


def status_lines(
    url: str,
    workdir: Path,
    *,
    username: str,
    password: str,
    wait: float = START_WAIT_SECONDS,
    stopping: Callable[[], bool] = lambda: False,
) -> tuple[list[str], list[str]]:
    """(lines to say, lines that are trouble) about OpenCode's MCP servers for `workdir`,
    asked in short tries for up to `wait` seconds while OpenCode starts them; `stopping`
    ends the wait at once (Ctrl-C)."""
    deadline = time.monotonic() + wait
    while True:
        left = max(0.1, min(TRY_SECONDS, deadline - time.monotonic()))
        check = asyncio.run(
            workdir_mcp_status(url, workdir, username=username, password=password, timeout=left)
        )
        if not check.get("timed_out") or time.monotonic() >= deadline or stopping():
            break
    servers = check.get("servers")
    if servers is None:
        known = f"MCP servers of {workdir}: not known yet ({check['error']})"
        return ([known] if check.get("timed_out") else []), trouble(check)
    if not servers:
        return [f"MCP servers of {workdir}: OpenCode runs none"], []
    states = ", ".join(f"{name} {server['status']}" for name, server in servers.items())
    return [f"MCP servers of {workdir} (OpenCode): {states}"], trouble(check)
