"""Issue 23's bad input, for every tool of both MCP servers, through FastMCP's own client: with
its arguments missing, each one of the wrong type, each one a megabyte, and each one hostile,
a tool answers a result or a tool error that says why (its own refusal, or the schema's), never
an exception of its own ("Error calling tool ..."), and the server answers the next call."""

from __future__ import annotations

import asyncio
import subprocess

import httpx
import pytest
from fastmcp import Client

from accounts_app import services as accounts
from agentsys.mcp import slurm_tools
from agentsys.mcp.research_server import build_server
from agentsys.mcp.run_tools import AgentSysAPI
from scheduler_app.models import Sweep
from tests.unit.test_mcp_slurm_tools import FakeSlurm

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

MEGABYTE = "x" * 1_000_000
HOSTILE = [
    "../../../../etc/passwd",
    "/etc/shadow",
    "a\0b",
    "-rf",
    "--help",
    "' OR 1=1 --",
    "%s%s%n",
    "\u202e\ufeff\ud7ff",
    "x\ny=z",
    "\u2170" * 300,
]
PLAUSIBLE = {"string": "x", "integer": 1, "number": 1.0, "boolean": False, "object": {}}
WRONG = {
    "string": [12345, {"a": 1}, ["x"]],
    "integer": ["soon", 1.5, -(10**30)],
    "number": ["soon", {"a": 1}],
    "boolean": ["maybe", 7],
    "object": ["x", [1, 2]],
    "array": ["x", {"a": 1}],
}


def _kind(schema: dict) -> str:
    """A property's JSON type; for an optional one (anyOf [T, null]), T's."""
    if "type" in schema:
        return schema["type"] if isinstance(schema["type"], str) else schema["type"][0]
    for option in schema.get("anyOf", []):
        if option.get("type") not in (None, "null"):
            return option["type"]
    return "string"


def _cases(tool) -> list[dict]:
    """The argument sets to try on `tool`: none, then each property made bad in turn while the
    other required ones are plausible."""
    properties = tool.inputSchema.get("properties", {})
    required = tool.inputSchema.get("required", [])
    base = {name: PLAUSIBLE.get(_kind(properties[name]), "x") for name in required}
    cases = [{}]
    for name, schema in properties.items():
        kind = _kind(schema)
        bad = [*WRONG.get(kind, []), MEGABYTE]
        if kind == "string":
            bad += HOSTILE
        cases += [{**base, name: value} for value in bad]
    return cases


def _check_every_tool(server, skip: set[tuple[str, str]] = frozenset()) -> int:
    """Call every tool with every case; returns how many calls were made."""

    async def go() -> int:
        calls = 0
        async with Client(server) as client:
            for tool in await client.list_tools():
                for arguments in _cases(tool):
                    if any((tool.name, name) in skip for name in arguments):
                        continue
                    result = await client.call_tool(tool.name, arguments, raise_on_error=False)
                    calls += 1
                    if result.is_error:
                        text = result.content[0].text
                        assert not text.startswith("Error calling tool"), (tool.name, text[:300])
                        assert text.strip(), (tool.name, "an error that says nothing")
                # The server is still there for the next caller.
                assert await client.list_tools()
        return calls

    return asyncio.run(go())


def test_every_research_agent_tool_answers_bad_input_with_a_reason(
    tmp_path, django_user_model, settings
):
    from researchagent.asgi import application

    settings.AGENTSYS_WORKDIR = tmp_path
    user = django_user_model.objects.create_user("ada", password="pw-1234567")
    _, token = accounts.create_token(user=user, name="mcp")
    sweep = Sweep.objects.create(name="fuzz")
    http = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=application), base_url="http://testserver"
    )
    server = build_server(tmp_path, api=AgentSysAPI("", token, client=http), sweep_id=sweep.pk)
    # quick_bash runs what it is given (that is its job): only its other arguments are fuzzed.
    calls = _check_every_tool(server, skip={("quick_bash", "command")})
    assert calls > 150, calls  # every tool, every argument: the cases really ran


def test_every_slurm_tool_answers_bad_input_with_a_reason(tmp_path, monkeypatch):
    # Recorded, not run: a plausible job id must not cancel a job of the real cluster.
    fake = FakeSlurm()
    monkeypatch.setattr(subprocess, "run", fake)
    (tmp_path / "train.sh").write_text("#!/bin/sh\necho hi\n")
    calls = _check_every_tool(slurm_tools.build_server(tmp_path))
    assert calls > 60, calls
    # No value reached SLURM as a shell string or as an option of its own.
    for argv in fake.calls:
        assert isinstance(argv, list)
        assert "-rf" not in argv and "--help" not in argv, argv
