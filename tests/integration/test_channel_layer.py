"""runagentd checks at start-up that the channel layer really delivers; Redis is an option."""

import asyncio
import subprocess

import pytest
from channels_redis.pubsub import RedisPubSubChannelLayer

from agents_app.services import request_agent_start
from events_app.events import group_for
from tests.helpers import child_env, database_url_of_current_connection, manage
from tests.runtime_harness import A

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
REDIS_URL = "redis://127.0.0.1:6379/0"


def _run_daemon_briefly(**env) -> subprocess.CompletedProcess:
    daemon = manage(
        "runagentd",
        env=child_env(DATABASE_URL=database_url_of_current_connection(), **env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out, err = daemon.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        daemon.kill()
        out, err = daemon.communicate()
    return subprocess.CompletedProcess(daemon.args, daemon.returncode, out, err)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"CHANNEL_LAYER": "redis", "REDIS_URL": "redis://127.0.0.1:1/0"},
            "CHANNEL_LAYER=redis: a test message did not come back",
        ),
        ({"CHANNEL_LAYER": "memory"}, "CHANNEL_LAYER=memory works inside one process only"),
    ],
)
def test_a_broken_channel_layer_stops_runagentd_with_a_clear_message(env, message):
    result = _run_daemon_briefly(**env)
    assert result.returncode != 0
    assert message in result.stderr


def _start_agent():
    from django.db import connection

    try:
        return request_agent_start(
            cls_path=f"{A}.TestResearch", goal="x", project="demo", config={"ticks": 1}
        )
    finally:
        connection.close()  # this thread's connection would block the test DB's teardown


async def _collect(layer, channel, count, timeout=20.0):
    received = []
    while len(received) < count:
        received.append(await asyncio.wait_for(layer.receive(channel), timeout))
    return received


def test_redis_layer_carries_daemon_events_across_processes(agentsys_config):
    from tests.runtime_agents import ALL

    agentsys_config(extra_agent_classes=frozenset(ALL.split(",")))
    layer = RedisPubSubChannelLayer(hosts=[REDIS_URL])

    async def scenario():
        channel = await layer.new_channel()
        await layer.group_add(group_for("agents"), channel)
        try:
            daemon = manage(
                "runagentd",
                env=child_env(
                    DATABASE_URL=database_url_of_current_connection(),
                    CHANNEL_LAYER="redis",
                    REDIS_URL=REDIS_URL,
                    AGENTSYS_AGENT_CLASSES=ALL,
                    AGENTSYS_HOST_NAME="redis-host",
                ),
            )
            try:
                await asyncio.sleep(0)  # the daemon registers while we wait for its events
                agent = await asyncio.to_thread(
                    request_agent_start,
                    cls_path=f"{A}.TestResearch",
                    goal="x",
                    project="demo",
                    config={"ticks": 1},
                )
                messages = await _collect(layer, channel, 2)
            finally:
                daemon.terminate()
                await asyncio.to_thread(daemon.wait, 10)
        finally:
            await layer.group_discard(group_for("agents"), channel)
            await layer.flush()
        return agent, messages

    agent, messages = asyncio.run(scenario())
    kinds = [(m["event"]["agent_id"], m["event"]["kind"]) for m in messages]
    assert kinds == [(agent.id, "started"), (agent.id, "done")]
    assert messages[0]["event"]["id"] + 1 == messages[1]["event"]["id"]
