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
import sys
from pathlib import Path

CONFIG_FILE = "opencode.json"
SCHEMA = "https://opencode.ai/config.json"
REPO = Path(__file__).resolve().parents[2]
SERVERS = {
    "research-agent": "agentsys.mcp.research_server",
    "slurm": "agentsys.mcp.slurm_tools",
}


class ConfigRefused(ValueError):
    """The existing file cannot be merged into without losing what is in it."""


def server_entries(workdir: Path, *, python: str = sys.executable, slurm: bool = True) -> dict:
    """The `mcp` entries of AgentSys's servers for `workdir`."""
    entries = {}
    for name, module in SERVERS.items():
        if name == "slurm" and not slurm:
            continue
        entries[name] = {
            "type": "local",
            "command": [str(Path(python).absolute()), "-m", module, "--workdir", str(workdir)],
            "environment": {"PYTHONPATH": str(REPO)},
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
    return said
