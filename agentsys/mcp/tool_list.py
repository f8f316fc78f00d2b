"""The README's list of every MCP tool of the servers with its arguments, made from the tools
themselves, so the two cannot drift apart: `python -m agentsys.mcp.tool_list` prints it,
`python -m agentsys.mcp.tool_list --write README.md` puts it between the README's markers, and
tests/unit/test_mcp_tool_list.py fails when the README's list is not what the tools say."""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from pathlib import Path

from fastmcp import Client, FastMCP

START = "<!-- mcp-tools: made by `python -m agentsys.mcp.tool_list --write README.md` -->"
END = "<!-- /mcp-tools -->"


# The server outside clients get: listed by the tools it has that research-agent has not.
CLIENTS = "agentsys"
CLIENTS_HEADING = (
    f"`{CLIENTS}` (`manage.py mcp`, `/mcp`): research-agent's tools but quick_bash, and these, "
    "a person's, never the research agent's"
)


def servers(workdir: Path) -> dict[str, FastMCP]:
    """Both servers as OpenCode gets them: research-agent with its run tools and quick_bash,
    and slurm; and the one outside clients get. (Built only to be read: nothing is called.)"""
    from agentsys.mcp import slurm_tools
    from agentsys.mcp.research_server import build_server, client_server
    from agentsys.mcp.run_tools import AgentSysAPI

    return {
        "research-agent": build_server(workdir, api=AgentSysAPI("", "")),
        "slurm": slurm_tools.build_server(workdir),
        CLIENTS: client_server(workdir, AgentSysAPI("", "")),
    }


def tool_list() -> str:
    with tempfile.TemporaryDirectory() as workdir:
        listed = {
            name: asyncio.run(_tools(server)) for name, server in servers(Path(workdir)).items()
        }
    agents = {tool.name for tool in listed["research-agent"]}
    listed[CLIENTS] = [tool for tool in listed[CLIENTS] if tool.name not in agents]
    lines = []
    for server, tools in listed.items():
        lines.append(CLIENTS_HEADING + ":" if server == CLIENTS else f"`{server}`:")
        lines.append("")
        lines += [f"- {_line(tool)}" for tool in tools]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


async def _tools(server: FastMCP) -> list:
    async with Client(server) as client:
        return sorted(await client.list_tools(), key=lambda tool: tool.name)


def _line(tool) -> str:
    schema = getattr(tool, "input_schema", None) or {}
    required = set(schema.get("required", []))
    arguments = []
    for name, spec in schema.get("properties", {}).items():
        if name in required:
            arguments.append(name)
        else:
            arguments.append(f"{name}={json.dumps(spec.get('default'))}")
    summary = " ".join((tool.description or "").split())
    return f"`{tool.name}({', '.join(arguments)})`: {summary}"


def in_readme(readme: str) -> str | None:
    """The list as the README has it now (None: no markers)."""
    start, end = readme.find(START), readme.find(END)
    if start < 0 or end < start:
        return None
    return readme[start + len(START) : end].strip("\n") + "\n"


def written(readme: str, listing: str) -> str:
    start, end = readme.find(START), readme.find(END)
    if start < 0 or end < start:
        raise ValueError(f"the README has no {START} ... {END} markers")
    return readme[: start + len(START)] + "\n" + listing + readme[end:]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", type=Path, help="the README to put the list in")
    args = parser.parse_args(argv)
    listing = tool_list()
    if args.write is None:
        print(listing, end="")
        return
    args.write.write_text(written(args.write.read_text(), listing))


if __name__ == "__main__":
    main()
