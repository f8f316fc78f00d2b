"""AgentSys's MCP servers in a workdir's OpenCode config (`opencode.json`), merged into what a
person already put there (issue 23, part 3).

OpenCode starts a local MCP server with the workdir as its current directory and none of our
environment, so each entry names the venv's interpreter by its absolute path and puts the
checkout on PYTHONPATH (the pitfall design doc §2.5 warns about: a bare `python` is whatever
the PATH finds, without our packages). A person's own servers and settings are kept; only the
entries named here are added or brought up to date, and the caller is told which.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from agentsys.git_exclude import GIT_TIMEOUT, keep_out_of_git, tracked

CONFIG_FILE = "opencode.json"
SCHEMA = "https://opencode.ai/config.json"
REPO = Path(__file__).resolve().parents[2]
SERVERS = {
    "research-agent": "agentsys.mcp.research_server",
    "slurm": "agentsys.mcp.slurm_tools",
}
# OpenCode cuts an MCP tool call at 60 s (the MCP SDK's default: "MCP error -32001: Request
# timed out") unless the entry's `timeout` (ms) says otherwise; wait_run may wait 300 s and
# quick_bash 120 s, so each entry allows them that and a margin.
TOOL_TIMEOUT_MS = 330_000


class ConfigRefused(ValueError):
    """The existing file cannot be merged into without losing what is in it."""


def server_entries(
    workdir: Path,
    *,
    python: str = sys.executable,
    slurm: bool = True,
    environment: dict[str, str] | None = None,
) -> dict:
    """The `mcp` entries of AgentSys's servers for `workdir`. `environment` goes to the
    research-agent server only (AGENTSYS_URL, AGENTSYS_API_TOKEN, AGENTSYS_SWEEP_ID: its run
    tools read them); the SLURM server needs none of it, a token least of all."""
    entries = {}
    for name, module in SERVERS.items():
        if name == "slurm" and not slurm:
            continue
        extra = environment if name == "research-agent" else None
        entries[name] = {
            "type": "local",
            "command": [str(Path(python).absolute()), "-m", module, "--workdir", str(workdir)],
            "environment": {**(extra or {}), "PYTHONPATH": str(REPO)},
            "timeout": TOOL_TIMEOUT_MS,
            "enabled": True,
        }
    return entries


def merge_servers(workdir: str | os.PathLike, entries: dict) -> list[str]:
    """Add or update `entries` in the workdir's opencode.json (created if missing); returns
    one line per server saying what happened. Refuses (ConfigRefused, file untouched) a file
    that is not a JSON object or whose `mcp` is not an object."""
    path = Path(workdir) / CONFIG_FILE
    config: dict = {"$schema": SCHEMA}
    if path.exists():
        try:
            config = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ConfigRefused(f"{path} is not readable JSON ({error}): left as it is") from None
        if not isinstance(config, dict):
            raise ConfigRefused(f"{path} does not hold a JSON object: left as it is")
    servers = config.setdefault("mcp", {})
    if not isinstance(servers, dict):
        raise ConfigRefused(f'{path}: "mcp" is not an object: left as it is')
    said = []
    for name, entry in entries.items():
        mine = servers.get(name)
        if isinstance(mine, dict) and "enabled" in mine:  # a person's switch stays theirs
            entry = {**entry, "enabled": mine["enabled"]}
        if mine == entry:
            said.append(f"{name}: already up to date")
            continue
        said.append(f"{name}: {'updated' if name in servers else 'added'}")
        servers[name] = entry
    if any(not line.endswith("up to date") for line in said):
        tmp = path.with_name(f".{CONFIG_FILE}.tmp")
        tmp.write_text(json.dumps(config, indent=2) + "\n")
        tmp.replace(path)
    if not tracked(workdir, CONFIG_FILE):  # ours (holding this machine's paths), not theirs
        keep_out_of_git(workdir, CONFIG_FILE)
    return said


def carry_servers(source: str | os.PathLike, target: str | os.PathLike) -> list[str]:
    """A research loop's worktree (agentsys.research.branch) gets the MCP servers of the
    workdir it came from: AgentSys's (those run with `--workdir`) pointed at the worktree,
    so that its tools list, run and read credentials there, and the person's own as they
    are. OpenCode reads opencode.json per directory, and the workdir's own is not in the
    worktree unless committed; a committed one changed here is the loop's, never committed
    by it (git's skip-worktree, in the worktree's own index)."""
    try:
        config = json.loads((Path(source) / CONFIG_FILE).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return []
    servers = config.get("mcp") if isinstance(config, dict) else None
    if not isinstance(servers, dict):
        return []
    entries = {}
    for name, entry in servers.items():  # the person's own servers too, as they are
        command = entry.get("command") if isinstance(entry, dict) else None
        if isinstance(command, list) and "--workdir" in command[:-1]:
            at = command.index("--workdir") + 1
            entry = {**entry, "command": [*command[:at], str(target), *command[at + 1 :]]}
        entries[name] = entry
    if not entries:
        return []
    try:
        said = merge_servers(target, entries)
    except (ConfigRefused, OSError):
        return []
    if tracked(target, CONFIG_FILE):
        subprocess.run(
            ["git", "-C", str(target), "update-index", "--skip-worktree", "--", CONFIG_FILE],
            capture_output=True,
            timeout=GIT_TIMEOUT,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    return said
