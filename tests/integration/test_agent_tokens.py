"""Issue 23, part 1: a research loop's API token of its own. Issued when the loop starts (owned,
when no person started the loop, by the `agents` service user, which cannot log in; a new one
revokes the earlier ones), revoked when the loop ends in any end state; with it the API reads
but changes only runs and sweeps (issue 34: only its own loop's, test_loop_token_scope.py), and
a run it makes joins the loop's sweep and names the loop as its creator (API and run page). It
cannot make or revoke API tokens, and the settings page shows only a person's own.

The slow test runs it all for real: daphne, a runagentd running a research loop, and the
research-agent MCP server started over stdio as OpenCode starts it, reading the loop's
credentials file."""

from __future__ import annotations

import asyncio
import json
import stat
import sys

import httpx
import pytest
from django.contrib.auth import get_user_model
from fastmcp import Client
from fastmcp.client.transports import StdioTransport

from accounts_app import services
from accounts_app.models import ApiToken
from agents_app.models import Agent
from agentsys.mcp.credentials import credentials_path
from agentsys.types import AgentStatus
from common import environment
from research_app.services import start_research
from runtime_app.memory_view import DjangoMemoryView
from runtime_app.runtime_store import DjangoRuntimeStore
from scheduler_app.models import Run
from scheduler_app.runs import launch as runs
from tests.helpers import REPO, child_env, wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def loop(tmp_path, settings):
    settings.AGENTSYS_WORKDIR = tmp_path
    made = start_research(goal="Tune lr", workdir=str(tmp_path))
    return Agent.objects.get(pk=made.agent_id)


def issue(agent: Agent) -> str:
    """What ResearchAgent.on_start gets through its memory view."""
    return DjangoMemoryView(agent.id, agent.role, {"sweep": agent.sweep}).issue_api_token()


def get(client, path: str, token: str):
    return client.get(path, HTTP_X_AUTH_TOKEN=token)


def post(client, path: str, token: str, body: dict | None = None):
    return client.post(
        path, json.dumps(body or {}), content_type="application/json", HTTP_X_AUTH_TOKEN=token
    )


def test_an_agents_token_is_the_service_users_and_a_new_one_revokes_the_old(client, loop):
    first = issue(loop)
    assert get(client, "/api/runs", first).status_code == 200
    second = issue(loop)  # the loop resumed: a fresh token, the earlier one dead
    assert get(client, "/api/runs", first).status_code == 401
    assert get(client, "/api/runs", second).status_code == 200
    rows = ApiToken.objects.filter(agent_id=loop.id)
    assert [row.active for row in rows.order_by("created_at")] == [False, True]
    owner = rows.first().user
    assert owner.username == services.AGENTS_USERNAME
    assert not (owner.is_staff or owner.is_superuser or owner.has_usable_password())
    assert not client.login(username=services.AGENTS_USERNAME, password="")


@pytest.mark.parametrize("end", [AgentStatus.DONE, AgentStatus.FAILED, AgentStatus.STOPPED])
def test_the_agents_end_revokes_its_token(client, loop, end):
    token = issue(loop)
    store = DjangoRuntimeStore()
    store.transition(
        agent_id=loop.id, status=AgentStatus.RUNNING, kind="started", payload={}, pid=1
    )
    store.transition(agent_id=loop.id, status=AgentStatus.PAUSED, kind="paused", payload={})
    assert get(client, "/api/runs", token).status_code == 200  # paused is not an end
    store.transition(agent_id=loop.id, status=end, kind=str(end), payload={})
    refused = get(client, "/api/runs", token)
    assert refused.status_code == 401, refused.content


def test_a_run_it_makes_joins_its_loops_sweep_and_names_the_loop(client, loop, tmp_path):
    token = issue(loop)
    made = post(client, "/api/runs", token, {"name": "lr 0.1", "command": "true"})
    assert made.status_code == 201, made.content
    run = Run.objects.get(pk=made.json()["id"])
    assert (run.sweep_id, run.created_by_agent) == (loop.sweep, loop.id)
    assert get(client, f"/api/runs/{run.pk}", token).json()["created_by_agent"] == loop.id
    listed = get(client, f"/api/runs?sweep_id={loop.sweep}", token).json()
    assert [(r["id"], r["created_by_agent"]) for r in listed] == [(run.pk, loop.id)]

    # A sweep of its own that it names is the one it joins (issue 34: no other one).
    elsewhere = post(client, "/api/sweeps", token, {"name": "its own"}).json()["id"]
    named = post(client, "/api/runs", token, {"name": "n", "command": "t", "sweep_id": elsewhere})
    assert named.status_code == 201, named.content
    assert named.json()["sweep_id"] == elsewhere

    mine = runs.create_run(name="a person's", command="true")  # no agent: no creator, no sweep
    assert (mine.created_by_agent, mine.sweep_id) == ("", None)
    Run.objects.filter(pk__in=[mine.pk, run.pk]).update(status="done")
    again = post(client, f"/api/runs/{run.pk}/rerun", token)
    assert again.json()["created_by_agent"] == loop.id  # a rerun is made by whoever reruns
    assert again.json()["sweep_id"] == loop.sweep

    client.force_login(get_user_model().objects.create_user("ada", password="pw-1234567"))
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert f'made by <a href="/research/{loop.id}/">{loop.id}</a>' in page
    assert "made by" not in client.get(f"/runs/{mine.pk}/").content.decode()


def test_it_reads_everything_but_changes_only_runs_and_sweeps(client, loop):
    token = issue(loop)
    for path in ("/api/hosts", "/api/research", "/api/memories", f"/api/agents/{loop.id}"):
        assert get(client, path, token).status_code == 200, path
    assert post(client, "/api/sweeps", token, {"name": "its own"}).status_code == 201
    for path, body in [
        ("/api/research", {"goal": "another loop"}),
        (f"/api/research/{loop.id}/stop", {}),
        (f"/api/agents/{loop.id}/stop", {}),
        ("/api/memories", {"text": "a note"}),
        ("/api/sessions", {"title": "a chat"}),
    ]:
        refused = post(client, path, token, body)
        assert refused.status_code == 403, (path, refused.content)
        assert (
            "An agent's token may read, make, start, stop and rerun runs"
            in refused.json()["detail"]
        )
    assert Agent.objects.get(pk=loop.id).status == "idle"  # not stopped
    schema = get(client, "/api/openapi.json", token).json()["paths"]
    assert "403" in schema["/api/research"]["post"]["responses"]
    # The writes it may make answer 403 only outside its own loop (scheduler_app.loop_scope).
    for path in ("/api/runs", "/api/runs/{run_id}/start", "/api/sweeps"):
        refusal = schema[path]["post"]["responses"]["403"]["description"]
        assert refusal.startswith("A research loop's token, on a run or sweep"), path


def test_an_agents_token_cannot_make_or_revoke_api_tokens(client, loop):
    token = issue(loop)
    row = ApiToken.objects.get(agent_id=loop.id)
    # The token pages take a logged-in session only: a token is sent to the login page.
    made = client.post("/settings/tokens/", {"name": "mine now"}, HTTP_X_AUTH_TOKEN=token)
    assert made.status_code == 302 and made["Location"].startswith("/accounts/login/")
    revoked = client.post(f"/settings/tokens/{row.pk}/revoke/", HTTP_X_AUTH_TOKEN=token)
    assert revoked.status_code == 302 and revoked["Location"].startswith("/accounts/login/")
    assert ApiToken.objects.count() == 1 and ApiToken.objects.get().active
    with pytest.raises(services.TokenError, match="issued to their loops"):
        services.create_token(user=row.user, name="for the agents")


def test_the_settings_page_lists_a_persons_tokens_not_the_agents(client, loop, admin_user):
    agents_token = issue(loop)
    own, _ = services.create_token(user=admin_user, name="laptop")
    client.force_login(admin_user)
    page = client.get("/settings/").content.decode()
    assert own.prefix in page and "laptop" in page
    assert agents_token[:10] not in page and loop.id not in page
    # Nor can a person revoke it from there: it is not theirs (the admin can, below).
    row = ApiToken.objects.get(agent_id=loop.id)
    client.post(f"/settings/tokens/{row.pk}/revoke/")
    assert ApiToken.objects.get(pk=row.pk).active
    listed = client.get("/admin/accounts_app/apitoken/").content.decode()
    assert agents_token[:10] in listed and loop.id in listed
    # Even a session of the agents service user itself (it cannot log in) would not list them.
    client.force_login(row.user)
    assert agents_token[:10] not in client.get("/settings/").content.decode()


def test_a_person_named_agents_does_not_get_the_agents_tokens(client, loop, django_user_model):
    django_user_model.objects.create_user(services.AGENTS_USERNAME, password="pw-1234567")
    with pytest.raises(services.TokenError, match="is a person's account"):
        issue(loop)
    assert not ApiToken.objects.exists()


@pytest.mark.slow
def test_a_loops_mcp_run_tools_make_runs_in_its_sweep_until_it_ends(tmp_path, settings):
    """daphne, runagentd running a research loop (its model unreachable, so it waits between
    tries), and the research-agent MCP server over stdio reading the loop's credentials."""
    from tests.live_clients import TOKEN, Web
    from tests.runtime_harness import DaemonProcess, wait_status

    web = Web()
    daemon = None
    try:
        settings.AGENTSYS_WORKDIR = tmp_path
        loop = start_research(
            goal="Tune lr",
            workdir=str(tmp_path),
            extra_config={"opencode_url": "http://127.0.0.1:9", "pause_seconds": 60},
        )
        daemon = DaemonProcess("token-host", HOST="127.0.0.1", PORT=str(web.port))
        path = credentials_path(tmp_path)
        wait_until(path.exists, 30, message="the loop's credentials file")
        credentials = json.loads(path.read_text())
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert credentials["url"] == web.url and credentials["agent_id"] == loop.agent_id
        assert credentials["sweep_id"] == loop.sweep_id
        token = credentials["token"]
        row = ApiToken.objects.get(agent_id=loop.agent_id, revoked_at__isnull=True)
        assert row.user.username == services.AGENTS_USERNAME

        made = _tool(tmp_path, "create_run", name="from the model", command="true")
        assert not made.is_error, made.content
        run_id = made.structured_content["id"]
        with httpx.Client(base_url=web.url, headers={"X-Auth-Token": TOKEN}) as rest:
            shown = rest.get(f"/api/runs/{run_id}").json()
            assert (shown["sweep_id"], shown["created_by_agent"]) == (loop.sweep_id, loop.agent_id)
            assert rest.post(f"/api/research/{loop.agent_id}/stop").status_code == 202
            wait_status(loop.agent_id, "stopped", timeout=30)
            assert not path.exists()  # taken back at its end
            assert rest.get("/api/runs", headers={"X-Auth-Token": token}).status_code == 401
        after = _tool(tmp_path, "list_runs")
        assert after.is_error and "no research loop is running" in after.content[0].text
    finally:
        if daemon is not None:
            daemon.stop()
        web.stop()


def _tool(workdir, tool: str, **arguments):
    """One call through FastMCP's client to the research server as opencode.json starts it
    (agentsys.mcp.opencode_config): the venv's python, the workdir, no token in its env."""

    async def go():
        transport = StdioTransport(
            command=sys.executable,
            args=["-m", "agentsys.mcp.research_server", "--workdir", str(workdir)],
            env=child_env(PYTHONPATH=str(REPO), AGENTSYS_API_TOKEN=None, AGENTSYS_URL=None),
            cwd=str(workdir),
        )
        async with Client(transport) as client:
            return await client.call_tool(tool, arguments, raise_on_error=False)

    return asyncio.run(go())


@pytest.mark.parametrize(
    ("host", "url"),
    [
        ("127.0.0.1", "http://127.0.0.1:8123"),
        ("0.0.0.0", "http://127.0.0.1:8123"),  # noqa: S104 - the bind address, read
        ("::", "http://[::1]:8123"),
        ("lab.example", "http://lab.example:8123"),
    ],
)
def test_a_loop_reaches_the_api_where_the_web_server_listens(host, url):
    assert environment.load({"HOST": host, "PORT": "8123"}).api_url == url
