"""GET /api/health for probes and people, and the banner every page shows while no runagentd
heart-beats."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from types import SimpleNamespace

import channels_postgres.db
import pytest
from asgiref.sync import sync_to_async
from django.db import OperationalError
from django.test import AsyncClient
from django.utils import timezone

from hosts_app.models import Host, HostStatus
from researchagent import health
from tests.helpers import wait_until
from tests.integration.test_event_feed import TOKEN

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "channels_postgres"])
BANNER = "No runagentd is running: agents and runs will not start."


@pytest.fixture
def token(agentsys_config):
    agentsys_config(api_token=TOKEN)
    return {"X-Auth-Token": TOKEN}


@pytest.fixture
async def probe(channel_layer_on_test_db, close_db_connections):
    """GET /api/health through the ASGI stack, on this test's event loop (the view is async:
    the channel layer's connections belong to the server's loop)."""
    client = AsyncClient()

    async def get(headers=None):
        return await client.get("/api/health", headers=headers or {})

    yield get
    # channels-postgres's module-wide pool lock binds to the loop it was first contended on;
    # the next test has a loop of its own (a server has one loop for its life).
    channels_postgres.db.is_creating_connection_pool = asyncio.Lock()


async def test_the_pages_banner_asks_for_a_200_that_still_says_degraded(probe, token):
    # No runagentd: a probe gets 503; the banner of a page (whose browser would log each 503
    # as a console error) gets 200 with the same body.
    assert (await probe(token)).status_code == 503
    client = AsyncClient()
    answer = await client.get("/api/health?banner=true", headers=token)
    assert answer.status_code == 200
    body = answer.json()
    assert body["status"] == "degraded"
    assert any("runagentd" in problem for problem in body["problems"]), body


def _host_sync(name="gpu-1", *, ago=1.0, status=HostStatus.ONLINE):
    return Host.objects.create(
        name=name,
        status=status,
        daemon_pid=4242,
        last_heartbeat=timezone.now() - timedelta(seconds=ago),
    )


_host = sync_to_async(_host_sync)


async def test_healthy_with_a_heartbeating_daemon(probe, token):
    await _host()
    answer = await probe(token)
    assert answer.status_code == 200
    body = answer.json()
    assert body["status"] == "ok" and body["problems"] == []
    assert body["database"]["ok"] and body["database"]["latency_ms"] >= 0
    assert body["channel_layer"]["ok"] and body["channel_layer"]["round_trip_ms"] >= 0
    (host,) = body["hosts"]
    assert (host["name"], host["alive"], host["daemon_pid"]) == ("gpu-1", True, 4242)
    assert host["last_heartbeat"] and host["seconds_since_heartbeat"] < 30
    assert body["queue"] == {"queued": 0, "running": 0}


async def test_probe_without_credentials_gets_only_the_status(probe):
    await _host()
    answer = await probe()
    assert (answer.status_code, answer.json()) == (200, {"status": "ok"})


async def test_no_live_daemon_is_503_and_says_when_it_last_beat(probe, token):
    await _host("gpu-1", ago=120)  # stale heartbeat: dead though still marked online
    await _host("gpu-2", ago=5, status=HostStatus.OFFLINE)
    answer = await probe(token)
    assert answer.status_code == 503
    body = answer.json()
    assert body["status"] == "degraded"
    assert [h["alive"] for h in body["hosts"]] == [False, False]
    assert body["problems"][0].startswith(BANNER)
    assert "(gpu-2)" in body["problems"][0]  # the most recent heartbeat
    assert (await probe()).json() == {"status": "degraded"}


async def test_no_host_ever_is_503(probe):
    assert (await probe()).status_code == 503


async def test_database_down_is_503_with_the_reason(probe, token, monkeypatch):
    await _host()

    def refuse(*args, **kwargs):
        raise OperationalError("connection refused")

    monkeypatch.setattr(health, "connection", SimpleNamespace(ensure_connection=refuse))
    answer = await probe(token)
    assert answer.status_code == 503
    body = answer.json()
    assert body["database"] == {"ok": False, "error": "connection refused"}
    assert body["problems"] == ["database unreachable: connection refused"]
    assert "hosts" not in body


async def test_a_database_found_away_by_the_probe_itself_is_said_at_once(probe, token, monkeypatch):
    """The server died a moment ago and the web's watch has not noticed yet (CI: 1.6 s for a
    503, waiting out the channel layer on the dead database): the probe's own failed query,
    confirmed by a new connection failing too, is the outage, said at once."""
    from common import db_watch
    from common.db_outage import outage

    await _host()

    def refuse(*args, **kwargs):
        raise OperationalError("connection refused")

    async def never(*args, **kwargs):
        raise AssertionError("the channel layer rides the database that is away")

    monkeypatch.setattr(health, "connection", SimpleNamespace(ensure_connection=refuse))
    monkeypatch.setattr(db_watch, "_connect", refuse)
    monkeypatch.setattr(db_watch, "_close_the_pool", lambda: None)
    monkeypatch.setattr(health, "channel_layer_check", never)
    try:
        answer = await probe()
        assert answer.status_code == 503
        body = answer.json()
        assert body["problems"][0].startswith("The database is unreachable since"), body
        assert body["database"]["ok"] is False and body["database"]["down_since"], body
    finally:
        outage.end()


def test_every_page_shows_the_banner_while_no_daemon_beats(admin_client):
    _host_sync(ago=300)
    for path in ("/", "/admin/", "/admin/scheduler_app/run/"):
        page = admin_client.get(path).content.decode()
        assert BANNER in page, path
        assert "Last heartbeat:" in page and "(gpu-1)" in page


def test_no_banner_while_a_daemon_beats(admin_client):
    _host_sync()
    for path in ("/", "/admin/"):
        assert BANNER not in admin_client.get(path).content.decode()


@pytest.mark.django_db(transaction=True)
def test_health_shows_whether_opencode_answers(
    api, agentsys_config, opencode_server, memory_channel_layer
):
    agentsys_config(opencode_url=opencode_server.url, opencode_password=opencode_server.password)
    found = api("get", "/api/health").json()["opencode"]
    assert found["ok"] is True and found["version"] == "1.18.33"
    assert found["url"] == opencode_server.url

    agentsys_config(opencode_password="wrong")
    body = api("get", "/api/health").json()
    assert body["opencode"]["ok"] is False and "401" in body["opencode"]["error"]
    assert any("opencode" in w for w in body["warnings"])

    from tests.helpers import free_port

    agentsys_config(opencode_url=f"http://127.0.0.1:{free_port()}")
    down = api("get", "/api/health").json()["opencode"]
    assert down["ok"] is False and "unreachable" in down["error"]


# -- the workdir's MCP servers, as OpenCode runs them (issue 23, part 3) --------------------


@pytest.fixture
def mcp_health(api, agentsys_config, memory_channel_layer):
    """GET /api/health's body, OpenCode's MCP status not kept from an earlier call."""
    from agentsys.mcp import status as mcp_status

    def get(**config):
        agentsys_config(**config)
        mcp_status.forget()
        started = time.monotonic()
        answer = api("get", "/api/health")
        return answer, time.monotonic() - started

    yield get
    mcp_status.forget()


@pytest.mark.django_db(transaction=True)
def test_health_shows_each_mcp_server_connected_or_failed_with_its_fix(
    mcp_health, opencode_server, workdir
):
    from agentsys.mcp.opencode_config import merge_servers, server_entries

    entries = server_entries(workdir, slurm=False)
    entries["dead-end"] = {"type": "local", "command": [str(workdir / "no-such-server")]}
    merge_servers(workdir, entries)
    where = {"opencode_url": opencode_server.url, "opencode_password": opencode_server.password}

    def known():  # OpenCode starts a workdir's servers on the first question (seconds)
        answer, _ = mcp_health(**where)
        assert answer.status_code == 503  # no runagentd here; the MCP state is no problem
        body = answer.json()
        return body if "servers" in body["mcp"] else None

    body = wait_until(known, 60, 0.5, "OpenCode's MCP status")
    servers = body["mcp"]["servers"]
    assert body["mcp"]["directory"] == str(workdir)
    assert servers["research-agent"] == {"status": "connected"}  # the real server, started
    dead = servers["dead-end"]
    assert dead["status"] == "failed" and "no-such-server" in dead["error"]
    assert "ENOENT" in dead["error"] and '"dead-end"' in dead["fix"]
    (warning,) = [w for w in body["warnings"] if w.startswith("MCP server")]
    assert warning.startswith("MCP server dead-end failed: ENOENT") and "Fix: " in warning
    assert not any("research-agent" in w for w in body["warnings"])
    assert body["status"] == "degraded" and not any("MCP" in p for p in body["problems"])


class _FakeOpenCode:
    """Answers /global/health like OpenCode and /mcp with what a test gives: garbage, or
    nothing for a while. The real OpenCode never does either; a broken proxy in front of
    it might."""

    def __init__(self, mcp_body: bytes, delay: float = 0.0):
        import http.server
        import threading

        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                if self.path.startswith("/mcp"):
                    time.sleep(delay)
                    body = mcp_body
                else:
                    body = b'{"healthy": true, "version": "1.18.33"}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{outer.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "garbage", [b"<html>502 Bad Gateway</html>", b"[1, 2]", b'{"x": "y", "z": {"status": 1}}']
)
def test_health_never_fails_on_an_mcp_answer_that_makes_no_sense(mcp_health, garbage):
    fake = _FakeOpenCode(garbage)
    try:
        answer, took = mcp_health(opencode_url=fake.url, opencode_password="p")
    finally:
        fake.close()
    assert answer.status_code == 503 and took < 5  # degraded for want of a runagentd only
    body = answer.json()
    assert body["opencode"]["ok"] is True and body["mcp"]["ok"] is False
    assert any(w.startswith("MCP") for w in body["warnings"]), body


@pytest.mark.django_db(transaction=True)
def test_health_stays_fast_while_opencode_is_slow_to_say_and_asks_nothing_when_it_is_down(
    mcp_health,
):
    from agentsys.mcp.status import MCP_TIMEOUT_SECONDS

    fake = _FakeOpenCode(b'{"research-agent": {"status": "connected"}}', delay=10)
    try:
        answer, took = mcp_health(opencode_url=fake.url, opencode_password="p")
    finally:
        fake.close()
    assert took < MCP_TIMEOUT_SECONDS + 2, took
    mcp = answer.json()["mcp"]
    assert mcp["timed_out"] is True and "within" in mcp["error"]
    assert not any(w.startswith("MCP") for w in answer.json()["warnings"])  # not known yet

    from tests.helpers import free_port

    down, took = mcp_health(opencode_url=f"http://127.0.0.1:{free_port()}")
    assert down.json()["mcp"]["error"] == "not asked: OpenCode is not answering"
    assert [w for w in down.json()["warnings"] if "MCP" in w] == [] and took < 5
