"""Events produced by runagentd reach real clients through a real daphne: a WebSocket client,
and an SSE client that resumes with Last-Event-ID after the web process restarted."""

import asyncio
import json

import httpx
import pytest
from websockets.asyncio.client import connect

from agents_app.services import request_agent_start
from agentsys.types import AgentStatus
from events_app.models import Event
from tests.live_clients import TOKEN, Web
from tests.runtime_harness import A, DaemonProcess, wait_status

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def system(agentsys_config):
    from tests.runtime_agents import ALL

    agentsys_config(extra_agent_classes=frozenset(ALL.split(",")))
    daemon = DaemonProcess("e2e-host")
    web = Web()
    yield daemon, web
    if web.process.poll() is None:
        web.stop()
    daemon.stop()


def _start_agent(**config):
    from django.db import connection

    try:
        return request_agent_start(
            cls_path=f"{A}.TestResearch", goal="e2e", project="demo", config=config
        )
    finally:
        connection.close()


def test_websocket_client_receives_daemon_events_through_daphne(system):
    _, web = system

    async def scenario():
        url = f"ws://127.0.0.1:{web.port}/ws/agents/events/"
        async with connect(
            url, additional_headers={"X-Auth-Token": TOKEN}, origin=f"http://127.0.0.1:{web.port}"
        ) as ws:
            agent = await asyncio.to_thread(_start_agent, ticks=3, emit_ticks=True)
            received = []
            while not received or received[-1]["kind"] != "done":
                frame = json.loads(await asyncio.wait_for(ws.recv(), 20))
                if frame["agent_id"] == agent.id:
                    received.append(frame)
            return agent, received

    _, received = asyncio.run(scenario())
    kinds = [frame["kind"] for frame in received]
    assert kinds == ["started", "tick", "tick", "tick", "done"]
    ids = [frame["id"] for frame in received]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)


def test_websocket_refuses_a_client_without_credentials(system):
    _, web = system

    async def scenario():
        async with connect(
            f"ws://127.0.0.1:{web.port}/ws/agents/events/", origin=f"http://127.0.0.1:{web.port}"
        ) as ws:
            await ws.recv()

    with pytest.raises(Exception) as refused:
        asyncio.run(scenario())
    assert "4401" in str(refused.value) or "403" in str(refused.value)


def _read_sse(port: int, last_event_id: int, count: int) -> list[dict]:
    events = []
    headers = {"X-Auth-Token": TOKEN, "Last-Event-ID": str(last_event_id)}
    with httpx.stream(
        "GET", f"http://127.0.0.1:{port}/api/agents/events", headers=headers, timeout=20
    ) as response:
        assert response.status_code == 200
        current: dict = {}
        for line in response.iter_lines():
            if line.startswith("id: "):
                current["id"] = int(line[4:])
            elif line.startswith("data: "):
                current["data"] = json.loads(line[6:])
            elif line == "" and "id" in current:
                events.append(current)
                current = {}
                if len(events) == count:
                    break
    return events


def test_sse_replays_with_last_event_id_after_the_web_restarted(system):
    _, web = system
    first = _start_agent(ticks=2, emit_ticks=True)
    wait_status(first.id, AgentStatus.DONE)
    seen = _read_sse(web.port, 0, 2)  # the client saw the first two events, then dropped
    assert [e["id"] for e in seen] == [1, 2]

    web.stop()  # the web process goes away; the daemon goes on producing events
    second = _start_agent(ticks=2, emit_ticks=True)
    wait_status(second.id, AgentStatus.DONE)
    total = Event.objects.filter(stream="agents").count()
    web = Web(web.port)
    try:
        rest = _read_sse(web.port, seen[-1]["id"], total - 2)
    finally:
        web.stop()
    assert [e["id"] for e in rest] == list(range(3, total + 1))  # no gap, no duplicate
    assert {e["data"]["agent_id"] for e in rest} == {first.id, second.id}
    assert rest[-1]["data"]["kind"] == "done"
