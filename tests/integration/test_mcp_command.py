"""Issue 23, part 4 (stdio): `manage.py mcp` serves AgentSys's tools to any MCP client, here
FastMCP's own client over stdio: with a user's API token it lists runs and directories, and has
no shell; without a token, or with a revoked one, it refuses to start, saying why."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport

from accounts_app import services as accounts
from scheduler_app.runs import launch as runs
from tests.helpers import REPO, child_env, database_url_of_current_connection

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _env(tmp_path, token: str | None) -> dict:
    return child_env(
        DATABASE_URL=database_url_of_current_connection(),
        AGENTSYS_API_TOKEN=token,
        AGENTSYS_WORKDIR=str(tmp_path),
        RESEARCH_AGENT_USER_AUTH_TOKEN=None,
        LOG_LEVEL="WARNING",
    )


@pytest.fixture
def token(django_user_model):
    user = django_user_model.objects.create_user("ada", password="pw-1234567")
    return accounts.create_token(user=user, name="ide")


def test_an_mcp_client_lists_runs_and_files_through_manage_py_mcp(tmp_path, token):
    (tmp_path / "train.py").write_text("print(1)\n")
    run = runs.create_run(name="from the api", command="true", workdir=str(tmp_path))

    async def go():
        transport = StdioTransport(
            command=sys.executable,
            args=["manage.py", "mcp"],
            env=_env(tmp_path, token[1]),
            cwd=str(REPO),
        )
        async with Client(transport) as client:
            tools = {tool.name for tool in await client.list_tools()}
            listed = await client.call_tool("list_runs", {})
            files = await client.call_tool("list_directory", {})
            return tools, listed.structured_content["result"], files.structured_content

    tools, listed, files = asyncio.run(go())
    assert "quick_bash" not in tools
    assert {"create_run", "start_run", "get_run", "wait_run", "list_directory"} <= tools
    assert [r["id"] for r in listed] == [run.pk]
    assert [e["name"] for e in files["entries"]] == ["train.py"]


def test_no_token_or_a_revoked_one_is_refused_at_start(tmp_path, token):
    def start(value):
        return subprocess.run(
            [sys.executable, "manage.py", "mcp"],
            cwd=REPO,
            env=_env(tmp_path, value),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )

    missing = start(None)
    assert missing.returncode != 0 and "AGENTSYS_API_TOKEN is not set" in missing.stderr
    accounts.revoke_token(token_id=token[0].pk)
    revoked = start(token[1])
    assert revoked.returncode != 0 and "not a valid API token" in revoked.stderr
    assert "Traceback" not in revoked.stderr
