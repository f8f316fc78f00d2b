"""Issue 23, part 1: how a research loop hands its API token to its workdir's MCP server
(agentsys.mcp.credentials): an owner-only file written atomically, read at each call of a run
tool (a new loop's token is used without a restart), removed only by the loop it belongs to;
no file or a broken one is a tool error saying why. The REST API here is httpx's mock
transport, recording what each call sent; the MCP side is FastMCP's own client."""

from __future__ import annotations

import asyncio
import json
import os
import stat
from types import SimpleNamespace

import httpx
import pytest
from fastmcp import Client

from agentsys.deployment import Deployment
from agentsys.mcp.credentials import (
    CREDENTIALS_FILE,
    Credentials,
    NoCredentials,
    credentials_path,
    read_credentials,
    remove_credentials,
    write_credentials,
)
from agentsys.mcp.research_server import build_server, loop_field
from agentsys.mcp.run_tools import AgentSysAPI
from agentsys.research import tool_token

A = Credentials(url="http://agentsys-a:8000", token="ast_a", sweep_id="sw-a", agent_id="research-a")
B = Credentials(url="http://agentsys-b:9000", token="ast_b", sweep_id="sw-b", agent_id="research-b")


def test_written_owner_only_and_atomically_then_read_back(tmp_path):
    path = write_credentials(tmp_path, A)
    assert path == tmp_path / ".agents" / "mcp" / "credentials.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert read_credentials(tmp_path) == A
    leftover = path.with_name(f".credentials.json.{os.getpid()}.tmp")  # of a writer that died
    leftover.write_text("")
    leftover.chmod(0o644)
    write_credentials(tmp_path, B)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and read_credentials(tmp_path) == B
    assert sorted(p.name for p in path.parent.iterdir()) == ["credentials.json"]  # no temp left


def test_no_file_says_no_loop_is_running_there(tmp_path):
    with pytest.raises(NoCredentials, match="no research loop is running in"):
        read_credentials(tmp_path)


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("not json", "Expecting value"),
        ("[1, 2]", "not a JSON object"),
        (json.dumps({"url": "http://x", "token": ""}), "no token"),
        (json.dumps({"url": "file:///etc/passwd", "token": "ast_x"}), "no http(s) url"),
        (json.dumps({"url": "http://x", "token": 5}), "not a string"),
        (json.dumps({"url": "http://x", "token": "ast_" + "x" * 70_000}), "over 65536 bytes"),
        (b'{"url": "\xff"}', "can't decode"),
    ],
)
def test_a_broken_file_is_refused_saying_so(tmp_path, content, why):
    path = credentials_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(NoCredentials, match="is not a loop's credentials") as refused:
        read_credentials(tmp_path)
    assert why in str(refused.value)


def test_only_the_loop_it_belongs_to_removes_it(tmp_path):
    write_credentials(tmp_path, B)  # a newer loop took the workdir over
    assert not remove_credentials(tmp_path, A.agent_id)
    assert read_credentials(tmp_path) == B
    assert remove_credentials(tmp_path, B.agent_id)
    assert not credentials_path(tmp_path).exists()
    assert not remove_credentials(tmp_path, B.agent_id)  # gone already: nothing to do


class RecordingAPI:
    """AgentSys's REST API as httpx's mock transport: answers POST /api/runs, records calls."""

    def __init__(self):
        self.calls: list[tuple[str, str, dict]] = []
        self.client = httpx.AsyncClient(transport=httpx.MockTransport(self.answer))

    def answer(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content or b"{}")
        self.calls.append((str(request.url), request.headers["X-Auth-Token"], body))
        return httpx.Response(201, json={"id": "run-1", "status": "ready", **body})


def run_tool(workdir, api: RecordingAPI, tool: str, **arguments):
    """The research server as `main` builds it without AGENTSYS_API_TOKEN."""
    rest = AgentSysAPI(loop_field(workdir, "url"), loop_field(workdir, "token"), client=api.client)
    server = build_server(workdir, api=rest, sweep_id=loop_field(workdir, "sweep_id"))

    async def go():
        async with Client(server) as client:
            return await client.call_tool(tool, arguments, raise_on_error=False)

    return asyncio.run(go())


def test_each_call_uses_the_loop_running_now(tmp_path):
    api = RecordingAPI()
    missing = run_tool(tmp_path, api, "create_run", name="n", command="true")
    assert missing.is_error and "no research loop is running in" in missing.content[0].text
    assert api.calls == []  # nothing was sent without a token

    write_credentials(tmp_path, A)
    assert not run_tool(tmp_path, api, "create_run", name="n", command="true").is_error
    write_credentials(tmp_path, B)  # a new loop: the same server uses its token at once
    assert not run_tool(tmp_path, api, "create_run", name="n", command="true").is_error
    sent = [(url, token, body.get("sweep_id")) for url, token, body in api.calls]
    assert sent == [
        ("http://agentsys-a:8000/api/runs", "ast_a", "sw-a"),
        ("http://agentsys-b:9000/api/runs", "ast_b", "sw-b"),
    ]

    credentials_path(tmp_path).write_text("{")
    broken = run_tool(tmp_path, api, "list_runs")
    assert broken.is_error and "is not a loop's credentials" in broken.content[0].text


class Loop(SimpleNamespace):
    """What tool_token needs of a ResearchAgent."""

    async def in_memory(self, method: str, /, **kwargs):
        return getattr(self.memory, method)(**kwargs)


def loop(api_url="http://127.0.0.1:8000", memory=None) -> Loop:
    memory = memory or SimpleNamespace(issue_api_token=lambda: "ast_issued")
    return Loop(
        id="research-1",
        deployment=Deployment(api_url=api_url),
        memory=memory,
        scope=SimpleNamespace(sweep="sw-1"),
    )


def test_a_loop_hands_over_its_token_and_takes_it_back(tmp_path):
    agent = loop()
    assert asyncio.run(tool_token.hand_over(agent, tmp_path))
    assert read_credentials(tmp_path) == Credentials(
        url="http://127.0.0.1:8000", token="ast_issued", sweep_id="sw-1", agent_id="research-1"
    )
    tool_token.take_back(agent, tmp_path)
    assert not (tmp_path / CREDENTIALS_FILE).exists()


def test_a_loop_without_a_token_goes_on_without_the_file(tmp_path):
    def broken():
        raise RuntimeError("database down")

    assert not asyncio.run(tool_token.hand_over(loop(api_url=""), tmp_path))
    assert not asyncio.run(tool_token.hand_over(loop(memory=SimpleNamespace()), tmp_path))
    failing = loop(memory=SimpleNamespace(issue_api_token=broken))
    assert not asyncio.run(tool_token.hand_over(failing, tmp_path))
    assert not credentials_path(tmp_path).exists()


class _ChatAgent:
    """What tool_token.lend_to_chat reads of a SessionAgent."""

    def __init__(self, agent_id: str):
        from types import SimpleNamespace

        self.id, self.memory, self.issued = agent_id, object(), 0
        self.deployment = SimpleNamespace(api_url="http://127.0.0.1:8000")
        self.scope = SimpleNamespace(sweep="")

    async def in_memory(self, method: str):
        assert method == "issue_api_token"
        self.issued += 1
        return f"token-{self.id}-{self.issued}"


def test_a_chat_lends_its_token_only_where_no_loop_has_and_takes_it_back(tmp_path):
    import asyncio

    from agentsys.research import tool_token

    chat = _ChatAgent("orchestrator-1")
    write_credentials(
        tmp_path,
        Credentials(url="http://127.0.0.1:8000", token="loop-token", agent_id="research-1"),
    )
    assert asyncio.run(tool_token.lend_to_chat(chat, tmp_path)) is False
    assert read_credentials(tmp_path).token == "loop-token"  # the loop's stays

    remove_credentials(tmp_path, "research-1")  # the loop ended
    assert asyncio.run(tool_token.lend_to_chat(chat, tmp_path)) is True
    assert read_credentials(tmp_path).token == "token-orchestrator-1-1"
    assert asyncio.run(tool_token.lend_to_chat(chat, tmp_path)) is True
    assert chat.issued == 1  # its next turns keep the token it lent

    restarted = _ChatAgent("orchestrator-1")  # runagentd restarted: the old token is revoked
    assert asyncio.run(tool_token.lend_to_chat(restarted, tmp_path)) is True
    assert read_credentials(tmp_path).token == "token-orchestrator-1-1" and restarted.issued == 1
    tool_token.take_back_lent(restarted)
    assert not credentials_path(tmp_path).exists()
