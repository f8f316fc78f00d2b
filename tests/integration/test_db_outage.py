"""Each part's behaviour while PostgreSQL is down or just restarted, one at a time (the whole
system under a real restart: test_postgres_restart.py)."""

from __future__ import annotations

import asyncio
import time
from unittest import mock

import psycopg
import pytest
from django.db import OperationalError, connection
from django.test import Client

from agentsys.daemon import Daemon, DaemonSettings
from agentsys.store import StoreUnavailable
from hosts_app.models import Host, HostStatus
from runtime_app.agent_ports import WaitingPort, run_port
from runtime_app.chat_store import DjangoChatStore
from runtime_app.runtime_store import DjangoRuntimeStore
from tests.django_fixtures import API_TOKEN

# -- runagentd ---------------------------------------------------------------------------------


class FlakyStore:
    """Unavailable for the first `failures` calls of each method, then answers."""

    def __init__(self, failures: int):
        self.failures = failures
        self.calls: list[str] = []
        self.dead_host_checks = 0

    def record_event(self, *, agent_id, kind, payload):
        self.calls.append(kind)
        if len(self.calls) <= self.failures:
            raise StoreUnavailable("connection refused")
        return {"id": len(self.calls), "kind": kind}

    def record_heartbeat(self, *, host_id):
        pass

    def declare_dead_hosts(self, *, stale_after):
        self.dead_host_checks += 1
        return []


def _daemon(store, **settings) -> Daemon:
    return Daemon(store, DaemonSettings(host_name="outage", **settings))


def test_a_store_call_waits_for_the_database_instead_of_failing():
    store = FlakyStore(failures=3)
    daemon = _daemon(store)
    started = time.monotonic()
    event = asyncio.run(daemon.db(store.record_event, agent_id="a", kind="tick", payload={}))
    assert event == {"id": 4, "kind": "tick"}  # stored once it could be, not dropped
    assert 0.5 < time.monotonic() - started < 2  # backoff 0.1 + 0.2 + 0.4, no tight loop
    assert daemon._db_down_since is None  # and it noticed the database came back


def test_a_stopping_daemon_stops_waiting():
    store = FlakyStore(failures=100)
    daemon = _daemon(store)

    async def scenario():
        waiting = asyncio.create_task(
            daemon.db(store.record_event, agent_id="a", kind="tick", payload={})
        )
        await asyncio.sleep(0.3)
        daemon.request_stop()
        return await asyncio.wait_for(waiting, 2)

    with pytest.raises(StoreUnavailable):
        asyncio.run(scenario())


def test_other_hosts_are_not_judged_right_after_an_outage():
    # Every host's last heartbeat is old when the database comes back; the first daemon back
    # must not declare the others dead (and fail their agents) before they could beat.
    store = FlakyStore(failures=0)
    daemon = _daemon(store, dead_host_after=20)
    asyncio.run(daemon.heartbeat())
    assert store.dead_host_checks == 1  # no outage seen: judged as usual
    daemon._database_down(StoreUnavailable("down"))
    daemon._database_back()
    asyncio.run(daemon.heartbeat())
    assert store.dead_host_checks == 1
    daemon._db_back_at -= 20  # the others have had dead_host_after to beat again
    asyncio.run(daemon.heartbeat())
    assert store.dead_host_checks == 2


def _kill_backend(pid: int) -> None:
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    with psycopg.connect(**params, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])


@pytest.mark.django_db(transaction=True)
def test_the_store_reconnects_after_the_server_dropped_its_connection():
    """Outside requests Django never closes a broken connection: the daemon's stayed broken,
    every later call failing, even once the database was back."""
    store = DjangoRuntimeStore()
    host_id = store.register_host(name="n1", pid=1, gpus=[])
    _kill_backend(connection.connection.info.backend_pid)  # what a restart does to it
    with pytest.raises(StoreUnavailable):
        store.record_heartbeat(host_id=host_id)
    store.record_heartbeat(host_id=host_id)  # a fresh connection
    assert Host.objects.get(pk=host_id).status == HostStatus.ONLINE


@pytest.mark.django_db(transaction=True)
def test_the_chat_store_reports_an_outage_as_the_runtime_store_does():
    """The chat store is no part of the runtime store: it is wrapped on its own, so the
    daemon waits out an outage in a chat call too."""
    store = DjangoChatStore()
    host_id = DjangoRuntimeStore().register_host(name="n1", pid=1, gpus=[])
    _kill_backend(connection.connection.info.backend_pid)
    with pytest.raises(StoreUnavailable):
        store.claim_turns(host_id=host_id)
    assert store.claim_turns(host_id=host_id) == []  # a fresh connection


# -- workers' memory and run ports ----------------------------------------------------------


class FlakyView:
    agent_id = "executor-1"

    def __init__(self):
        self.attempts = 0

    def write_many(self, *, type, rows, tags=None):
        self.attempts += 1
        if self.attempts < 3:
            raise OperationalError("terminating connection due to administrator command")
        return len(rows)

    def query(self, query):
        raise ValueError("a bad query is the caller's error")


def test_memory_writes_wait_for_the_database():
    view = FlakyView()
    waiting = WaitingPort(view)
    with mock.patch("common.db_outage.drop_connection"):
        assert waiting.write_many(type="metrics", rows=[{"_step": 1}]) == 1
    assert view.attempts == 3  # stored once, after the outage: not lost, not failed
    assert waiting.agent_id == "executor-1"
    with pytest.raises(ValueError):
        waiting.query(None)  # other errors are not retried


def test_the_run_port_waits_for_the_database_as_memory_does():
    runs = run_port("executor-1", "executor", {"project": "p", "run": "run-1"})
    assert isinstance(runs, WaitingPort)
    assert (runs.agent_id, runs.run_id) == ("executor-1", "run-1")


# -- the web -----------------------------------------------------------------------------------


def _database_down():
    """Every new connection refused, as while PostgreSQL is down."""
    connection.close()
    refused = psycopg.OperationalError("connection refused: is the server running?")
    return mock.patch(
        "django.db.backends.postgresql.base.DatabaseWrapper.get_new_connection",
        side_effect=refused,
    )


@pytest.mark.django_db(transaction=True)
def test_the_web_answers_503_while_the_database_is_down(agentsys_config, django_user_model):
    agentsys_config(api_token=API_TOKEN)
    browser = Client(raise_request_exception=False)
    browser.force_login(django_user_model.objects.create_user("r", password="x" * 12))
    script = Client(raise_request_exception=False, HTTP_X_AUTH_TOKEN=API_TOKEN)
    with _database_down():
        api = script.get("/api/runs")  # the view's query fails
        page = browser.get("/")  # the session, loaded by a middleware, fails first
        stream = script.get("/api/agents/events")
    assert api.status_code == 503
    assert api["Content-Type"] == "application/json"
    assert "database is unavailable" in api.json()["detail"]
    assert page.status_code == 503
    assert page["Content-Type"].startswith("text/html")
    assert b"Database unavailable" in page.content
    assert page["Retry-After"] == api["Retry-After"] == "5"
    assert stream.status_code == 503
    # The database is back: the very next request is served, nothing to restart.
    assert script.get("/api/runs").status_code == 200
    assert browser.get("/").status_code == 200


@pytest.mark.django_db(transaction=True)
def test_a_known_outage_is_answered_without_touching_the_database(
    agentsys_config, django_user_model
):
    """Once the web's watch (common/db_watch.py) knows the database is away, no request
    reaches it: each would otherwise wait the pool's 30 s for a connection. Health says what
    and since when, to anyone; its banner variant with 200."""
    from common.db_outage import outage

    agentsys_config(api_token=API_TOKEN)
    browser = Client(raise_request_exception=False)
    browser.force_login(django_user_model.objects.create_user("r", password="x" * 12))
    script = Client(raise_request_exception=False, HTTP_X_AUTH_TOKEN=API_TOKEN)
    anyone = Client(raise_request_exception=False)
    touched = mock.patch(
        "django.db.backends.postgresql.base.DatabaseWrapper.get_new_connection",
        side_effect=AssertionError("a request reached the database"),
    )
    connection.close()
    outage.begin(psycopg.OperationalError("connection refused"))
    try:
        with touched:
            health = anyone.get("/api/health")
            banner = anyone.get("/api/health?banner=true")
            api = script.post("/api/runs", {"command": "true"}, content_type="application/json")
            page = browser.get("/runs/")
    finally:
        outage.end()
    assert health.status_code == 503 and banner.status_code == 200
    body = health.json()
    assert body["problems"][0].startswith("The database is unreachable since ")
    assert body["database"]["ok"] is False and body["database"]["down_since"]
    assert banner.json()["database"]["down_since"] == body["database"]["down_since"]
    assert api.status_code == 503 and "unreachable since" in api.json()["detail"]
    assert page.status_code == 503 and b'id="database-banner"' in page.content
    assert b"unreachable since" in page.content
    assert script.get("/api/runs").status_code == 200  # back: served again


# -- the channel layer -------------------------------------------------------------------------


def _kill_other_backends(spare: int | None) -> int:
    """Terminate every session of the test database but this thread's and `spare`: what a
    restart does to the channel layer's LISTEN connection and pooled connections."""
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    with psycopg.connect(**params, autocommit=True) as admin:
        rows = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid() AND pid <> %s",
            [spare or 0],
        ).fetchall()
    return len(rows)


@pytest.mark.django_db(transaction=True)
async def test_the_channel_layer_delivers_again_after_its_connections_were_dropped(
    channel_layer_on_test_db, close_db_connections
):
    from asgiref.sync import sync_to_async

    layer = channel_layer_on_test_db
    channel = await layer.new_channel()
    await layer.group_add("outage", channel)
    await layer.group_send("outage", {"type": "m", "n": 1})
    assert (await asyncio.wait_for(layer.receive(channel), 5))["n"] == 1

    teardowns = connection.connection.info.backend_pid if connection.connection else None
    assert await sync_to_async(_kill_other_backends)(teardowns) >= 2  # LISTEN + pooled
    # Upstream's LISTEN task died here for good: every later receive waited for ever.
    await layer.group_send("outage", {"type": "m", "n": 2})  # a pooled connection: checked
    assert (await asyncio.wait_for(layer.receive(channel), 5))["n"] == 2


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("sent", ["after the table read", "before the table read"])
async def test_a_message_sent_while_the_layer_listens_again_arrives_once(
    channel_layer_on_test_db, close_db_connections, sent
):
    """A reconnecting listener reads the messages queued during the outage and LISTENs again;
    a message sent between the two (senders are busy again at once) arrived before only if it
    came before the read. Now it arrives whichever side of the read it falls, and once."""
    from asgiref.sync import sync_to_async

    layer = channel_layer_on_test_db
    channel = await layer.new_channel()
    await layer.group_add("gap", channel)
    await layer.group_send("gap", {"type": "m", "n": 1})
    assert (await asyncio.wait_for(layer.receive(channel), 5))["n"] == 1

    read_queued = layer.django_db.retrieve_non_expired_queued_messages
    sends = []

    async def read_with_a_send_beside_it():
        if sent == "before the table read" and not sends:
            sends.append(await layer.group_send("gap", {"type": "m", "n": 2}))
        rows = await read_queued()
        if sent == "after the table read" and not sends:
            sends.append(await layer.group_send("gap", {"type": "m", "n": 2}))
        return rows

    teardowns = connection.connection.info.backend_pid if connection.connection else None
    with mock.patch.object(
        layer.django_db, "retrieve_non_expired_queued_messages", read_with_a_send_beside_it
    ):
        assert await sync_to_async(_kill_other_backends)(teardowns) >= 2
        assert (await asyncio.wait_for(layer.receive(channel), 5))["n"] == 2
    assert sends
    await layer.group_send("gap", {"type": "m", "n": 3})
    assert (await asyncio.wait_for(layer.receive(channel), 5))["n"] == 3  # not 2 again


# -- live clients ------------------------------------------------------------------------------


async def test_an_open_feed_outlasts_an_outage_and_goes_on_from_where_it_was(monkeypatch):
    from events_app import steady_feed

    table = [{"id": i} for i in range(1, 7)]
    followed_from, fails_at = [], {3, 5}

    async def follow_stream(stream, after, *, keepalive):
        followed_from.append(after)
        for message in table[after:]:
            if message["id"] in fails_at:
                fails_at.discard(message["id"])
                raise OperationalError("the database system is shutting down")
            yield message

    monkeypatch.setattr(steady_feed, "follow_stream", follow_stream)
    received = []
    async for message in steady_feed.follow_steadily("agents", 0):
        if message is not None:
            received.append(message["id"])
        if len(received) == 6:
            break
    assert received == [1, 2, 3, 4, 5, 6]  # no gap, no duplicate
    assert followed_from == [0, 2, 4]


@pytest.mark.django_db(transaction=True)
async def test_a_group_left_while_the_database_was_down_is_left_once_it_is_back(
    channel_layer_on_test_db, close_db_connections
):
    from asgiref.sync import sync_to_async
    from channels_postgres.models import GroupChannel

    from events_app.channel_layer import PooledDatabaseLayer

    layer = channel_layer_on_test_db
    channel = await layer.new_channel()
    await layer.group_add("outage", channel)
    down = psycopg.OperationalError("the database system is shutting down")
    with (
        mock.patch.object(PooledDatabaseLayer, "delete_channel_group", side_effect=down),
        pytest.raises(psycopg.OperationalError),
    ):
        await layer.group_discard("outage", channel)  # a client left during the outage
    members = sync_to_async(lambda: GroupChannel.objects.filter(channel=channel).count())
    assert await members() == 1  # upstream: for ever, each send storing a message for it
    await layer.leave_what_could_not_be_left()  # what reconnecting does
    assert await members() == 0


async def test_a_websocket_that_needs_the_latest_id_is_told_to_retry(agentsys_config):
    from channels.testing import WebsocketCommunicator

    from events_app.consumers import CLOSE_TRY_AGAIN_LATER, AgentEventsConsumer

    agentsys_config(api_token=API_TOKEN)
    client = WebsocketCommunicator(
        AgentEventsConsumer.as_asgi(),
        "/ws/agents/events/",
        headers=[(b"x-auth-token", API_TOKEN.encode())],
    )
    down = OperationalError("connection refused")
    with mock.patch("events_app.selectors.last_seq", side_effect=down):
        connected, _ = await client.connect()
        assert connected
        assert "database is unavailable" in (await client.receive_json_from())["error"]
        closed = await client.receive_output()
    assert closed["type"] == "websocket.close"
    assert closed["code"] == CLOSE_TRY_AGAIN_LATER
