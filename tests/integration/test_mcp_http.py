"""Issue 23, part 4 (HTTP): `/mcp` on the real web process (daphne) serves AgentSys's tools to
any MCP client, here FastMCP's own client over streamable HTTP. With a user's API token it
lists files and makes and reads runs, as that user's token, and has no shell; without a token,
with a wrong one, a revoked one or only a login session it is refused (401, saying why); a
body that is not JSON-RPC is a 4xx, never a 500."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from django.db import connections
from django.test import Client as DjangoClient
from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport
from mcp.shared.exceptions import MCPError

from accounts_app import services as accounts
from tests.live_clients import Web

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}
JSON = {"Content-Type": "application/json"}


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user("ada", password="pw-1234567")


@pytest.fixture
def token(user):
    return accounts.create_token(user=user, name="ide")


@pytest.fixture
def web(tmp_path):
    (tmp_path / "train.py").write_text("print(1)\n")
    server = Web(AGENTSYS_WORKDIR=str(tmp_path))
    yield server
    server.stop()


def _client(url: str, headers: dict) -> Client:
    return Client(StreamableHttpTransport(url, headers=headers))


def ok(result):
    assert not result.is_error, result.content
    return result.structured_content


def test_a_client_with_a_token_lists_files_and_makes_and_reads_a_run(web, token):
    row, secret = token

    async def go():
        async with _client(f"{web.url}/mcp", {"Authorization": f"Bearer {secret}"}) as client:
            tools = {tool.name for tool in await client.list_tools()}
            files = ok(await client.call_tool("list_directory", {}))
            made = ok(await client.call_tool("create_run", {"name": "via http", "command": "true"}))
            read = ok(await client.call_tool("get_run", {"run_id": made["id"]}))
        # The other header and the other spelling of the path.
        async with _client(f"{web.url}/mcp/", {"X-Auth-Token": secret}) as client:
            listed = ok(await client.call_tool("list_runs", {}))["result"]
        return tools, files, made, read, listed

    tools, files, made, read, listed = asyncio.run(go())
    assert "quick_bash" not in tools
    assert {"create_run", "start_run", "get_run", "wait_run", "list_directory"} <= tools
    assert [e["name"] for e in files["entries"]] == ["train.py"]
    assert read["id"] == made["id"] and read["status"] == "ready" and read["name"] == "via http"
    assert [r["id"] for r in listed] == [made["id"]]
    runs = httpx.get(f"{web.url}/api/runs", headers={"X-Auth-Token": secret}, timeout=30)
    assert [r["id"] for r in runs.json()] == [made["id"]]
    row.refresh_from_db()
    assert row.last_used_at is not None


def test_revoking_the_token_stops_a_tool_call_in_progress(web, token):
    """wait_run polls the REST API each second with the caller's token: revoked meanwhile,
    its next poll is refused and the call ends at once with a tool error (not at its
    timeout); the next request to /mcp is refused at the door."""
    row, secret = token

    def revoke():
        accounts.revoke_token(token_id=row.pk)
        connections.close_all()  # this thread's connection

    async def go():
        url, headers = f"{web.url}/mcp", {"Authorization": f"Bearer {secret}"}
        async with _client(url, headers) as client:
            made = ok(await client.call_tool("create_run", {"name": "w", "command": "true"}))
            assert made["status"] == "ready"
            ok(await client.call_tool("start_run", {"run_id": made["id"]}))  # no daemon: queued
            waiting = asyncio.ensure_future(
                client.call_tool(
                    "wait_run", {"run_id": made["id"], "timeout_seconds": 60}, raise_on_error=False
                )
            )
            await asyncio.sleep(1.5)
            assert not waiting.done()
            await asyncio.to_thread(revoke)
            started = time.monotonic()
            result = await waiting
            return result, time.monotonic() - started

    result, took = asyncio.run(go())
    assert result.is_error and "AgentSys refused (401)" in result.content[0].text
    assert took < 10
    again = httpx.post(
        f"{web.url}/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "X-Auth-Token": secret}
    )
    assert again.status_code == 401
    assert again.json()["detail"] == "The API token is unknown or revoked"


def test_no_token_a_wrong_one_a_revoked_one_or_a_session_is_refused(web, token, user):
    row, secret = token

    def post(headers: dict, path: str = "/mcp") -> httpx.Response:
        return httpx.post(
            f"{web.url}{path}", json=INITIALIZE, headers={**MCP_HEADERS, **headers}, timeout=30
        )

    missing = post({})
    assert missing.status_code == 401, missing.text
    assert missing.json()["detail"].startswith("No API token: send Authorization: Bearer")
    assert missing.headers["www-authenticate"].startswith("Bearer")
    for headers in (
        {"Authorization": "Bearer not-a-token"},
        {"X-Auth-Token": "not-a-token"},
        {"Authorization": f"Basic {secret}"},  # not a bearer token: none given
    ):
        refused = post(headers, "/mcp/")
        assert refused.status_code == 401, (headers, refused.text)
        assert "API token" in refused.json()["detail"]
    assert post({"Authorization": f"Bearer {secret}"}).status_code == 200
    assert post({"X-Auth-Token": secret}, "/mcp/").status_code == 200  # served, not redirected
    browser = DjangoClient()
    browser.force_login(user)
    session = browser.cookies["sessionid"].value
    by_session = post({"Cookie": f"sessionid={session}"})
    assert by_session.status_code == 401 and by_session.json()["detail"].startswith("No API token")
    accounts.revoke_token(token_id=row.pk)
    revoked = post({"Authorization": f"Bearer {secret}"})
    assert revoked.status_code == 401
    assert revoked.json()["detail"] == "The API token is unknown or revoked"

    async def with_fastmcp(headers):
        async with _client(f"{web.url}/mcp", headers) as client:
            await client.list_tools()

    # A real MCP client shows its user why.
    with pytest.raises(MCPError, match="No API token: send Authorization: Bearer"):
        asyncio.run(with_fastmcp({}))
    with pytest.raises(MCPError, match="The API token is unknown or revoked"):
        asyncio.run(with_fastmcp({"Authorization": f"Bearer {secret}"}))


def test_bad_requests_get_a_4xx_never_a_500(web, token):
    _, secret = token
    auth = {**MCP_HEADERS, "Authorization": f"Bearer {secret}"}
    url, huge = f"{web.url}/mcp", b"[" + b" " * (5 << 20) + b"]"
    # Generous: the first request imports FastMCP (over five seconds on a busy machine); what
    # this test holds the server to is the status of each answer.
    with httpx.Client(timeout=60) as client:
        answers = {
            "not json": client.post(url, content=b"{not json", headers={**auth, **JSON}),
            "not json, no content type": client.post(url, content=b"{not json", headers=auth),
            "not json-rpc": client.post(url, json={"hello": 1}, headers=auth),
            "a list of numbers": client.post(url, json=[1, 2, 3], headers=auth),
            "no method": client.post(url, json={"jsonrpc": "2.0", "id": 1}, headers=auth),
            "GET": client.get(url, headers=auth),
            "over 4 MiB": client.post(url, content=huge, headers={**auth, **JSON}),
            "a host not allowed": client.post(
                url, json=INITIALIZE, headers={**auth, "Host": "evil"}
            ),
        }
        for what, answer in answers.items():
            assert 400 <= answer.status_code < 500, (what, answer.status_code, answer.text[:300])
        assert answers["not json"].json()["error"]["code"] == -32700  # JSON-RPC's parse error
        assert answers["over 4 MiB"].status_code == 413
        assert answers["a host not allowed"].status_code == 400
        # Still serving after all that.
        assert client.post(url, json=INITIALIZE, headers=auth).status_code == 200


def test_the_lifespan_starts_once_on_first_use_and_ends_on_aclose(token, settings, tmp_path):
    """In process (daphne has no lifespan to drive it): first requests arriving together
    share one start of FastMCP's lifespan; aclose() ends it, and the next request starts it
    again."""
    from django.core.asgi import get_asgi_application

    from mcp_app.http_endpoint import with_mcp

    settings.AGENTSYS_WORKDIR = tmp_path
    app = with_mcp(get_asgi_application())
    endpoint = app.mcp_endpoint
    headers = {**MCP_HEADERS, "X-Auth-Token": token[1]}
    starts, serve = [], endpoint._serve

    async def counted_serve():
        starts.append(time.monotonic())
        await serve()

    endpoint._serve = counted_serve

    async def go():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            first = await asyncio.gather(
                *(http.post("/mcp", json=INITIALIZE, headers=headers) for _ in range(3))
            )
            task = endpoint._task
            await endpoint.aclose()
            again = await http.post("/mcp", json=INITIALIZE, headers=headers)
            restarted = endpoint._task
            await endpoint.aclose()
            return first, task, again, restarted

    first, task, again, restarted = asyncio.run(go())
    assert [answer.status_code for answer in first] == [200, 200, 200]
    assert len(starts) == 2  # once for the three first requests, once after aclose()
    assert task.done() and restarted is not task and restarted.done()
    assert again.status_code == 200
    assert again.json()["result"]["serverInfo"]["name"] == "agentsys"
