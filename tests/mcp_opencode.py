"""The real OpenCode calling AgentSys's MCP servers (issue 23): a workdir's opencode.json names
the servers (agentsys.mcp.opencode_config), the scripted model emits the tool calls, and the
tests read what happened from OpenCode's own session messages (the tool parts).

OpenCode reads a directory's opencode.json only when project config is on; the project's
LocalOpenCode switches it off (OPENCODE_DISABLE_PROJECT_CONFIG=1, verified: GET /mcp then
lists no server for a directory whose opencode.json names one), so these tests run one of
their own that reads it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path

import httpx
import psutil

from agentsys.mcp.opencode_config import merge_servers, server_entries
from agentsys.opencode.client import OpenCodeClient, Timeouts
from agentsys.opencode.server import DEMO_MODEL, DEMO_PROVIDER, LocalOpenCode, provider_config

RESEARCH_SERVER = "agentsys.mcp.research_server"


def start_opencode(scripted_llm, root: Path) -> LocalOpenCode:
    """An OpenCode that reads each session directory's opencode.json, as `make run` starts it."""
    (root / "cwd").mkdir(parents=True, exist_ok=True)
    server = LocalOpenCode(
        state_dir=root / "state",
        workdir=root / "cwd",
        config=provider_config(
            provider=DEMO_PROVIDER, model=DEMO_MODEL, demo_base_url=scripted_llm.base_url + "/v1"
        ),
        project_config=True,
    )
    server.start()
    return server


def write_config(workdir: Path, *, slurm: bool = False, environment: dict | None = None) -> None:
    merge_servers(workdir, server_entries(workdir, slurm=slurm, environment=environment))


def call(tool: str, /, **arguments) -> dict:
    """A scripted step: the model calls `tool` (OpenCode's `<server>_<tool>`)."""
    return {"tool_call": {"name": tool, "arguments": arguments}}


def script(match: str, *steps: dict, text: str = "Done.") -> dict:
    """One turn per step (OpenCode asks again after each tool result, with the same last user
    message), then the closing text."""
    turns = [{"match": match, "steps": [step]} for step in steps]
    return {"turns": [*turns, {"match": match, "steps": [{"text": text}]}]}


class Workdir:
    """Sessions of the real OpenCode in one directory, and what their tools did."""

    def __init__(self, opencode: LocalOpenCode, directory: Path):
        self.opencode, self.path, self.directory = opencode, Path(directory), str(directory)
        self.http = httpx.Client(
            base_url=opencode.url, auth=("opencode", opencode.password), timeout=30
        )

    def _client(self) -> OpenCodeClient:
        return OpenCodeClient(
            self.opencode.url,
            password=self.opencode.password,
            directory=self.directory,
            timeouts=Timeouts(first_token=90, total=240, idle=90),
        )

    def prompt(self, text: str, session: str | None = None) -> str:
        """Send `text` (in a new session unless one is given); returns once OpenCode is idle."""

        async def go() -> str:
            client = self._client()
            try:
                sid = session or await client.create_session()
                await client.prompt(sid, text, provider=DEMO_PROVIDER, model=DEMO_MODEL)
                return sid
            finally:
                await client.aclose()

        return asyncio.run(go())

    def tool_parts(self, session: str) -> list[dict]:
        """The session's tool parts, in order, from GET /session/{id}/message."""
        answer = self.http.get(f"/session/{session}/message", params={"directory": self.directory})
        answer.raise_for_status()
        return [p for m in answer.json() for p in m["parts"] if p["type"] == "tool"]

    def mcp_status(self) -> dict:
        answer = self.http.get("/mcp", params={"directory": self.directory})
        answer.raise_for_status()
        return answer.json()

    def connect(self, server: str) -> bool:
        """POST /mcp/{server}/connect: OpenCode starts the server (again)."""
        answer = self.http.post(f"/mcp/{server}/connect", params={"directory": self.directory})
        answer.raise_for_status()
        return answer.json()

    def disconnect(self, server: str) -> None:
        """POST /mcp/{server}/disconnect: OpenCode stops the server; it keeps a directory's
        servers running until then (or until it stops)."""
        self.http.post(f"/mcp/{server}/disconnect", params={"directory": self.directory})

    def close(self) -> None:
        self.http.close()


def output_of(part: dict) -> dict | list:
    """A completed tool part's result: the MCP tool's JSON text."""
    assert part["state"]["status"] == "completed", part["state"]
    return json.loads(part["state"]["output"])


def processes_with(marker: str) -> list[psutil.Process]:
    """Processes whose command line holds `marker`."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        if any(marker in arg for arg in process.info["cmdline"] or ()):
            found.append(process)
    return found


def research_servers(workdir: Path) -> list[psutil.Process]:
    return [p for p in processes_with(RESEARCH_SERVER) if str(workdir) in (p.info["cmdline"] or ())]


def kill_all(processes: list[psutil.Process]) -> None:
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
