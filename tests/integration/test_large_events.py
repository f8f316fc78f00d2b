"""Events of any size reach every live client (issue 18 item 3).

PostgreSQL caps a NOTIFY payload at 8,000 bytes. A 7,000-character chat message used to leave
the page on "Stop" for good: the channel layer's second copy of the big message failed an
assert, the feed died, and its close code (1011) was one daphne refuses to send, so the
socket stayed open and silent. Here every size arrives, on every socket that follows the
stream, and the feed goes on afterwards; a feed that fails closes its socket with a code a
server may send. All on the real channel layer (channels-postgres on the test database) and
the real ASGI application.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.conf import settings

from events_app import consumers
from events_app.events import AGENTS_STREAM, chat_stream, record_event
from events_app.events import publish_message as publish
from researchagent.asgi import application
from sessions_app.services import create_session
from sessions_app.turns import submit_turn
from tests.integration.test_event_feed import SSEClient, origin_header, session_cookie

pytestmark = [
    pytest.mark.django_db(transaction=True, databases=["default", "channels_postgres"]),
    pytest.mark.usefixtures("channel_layer_on_test_db", "close_db_connections"),
]
TOKEN = "t0ken-for-tests-0123456789abcdef"
WAIT = 10  # seconds; generous, a passing test never waits this long


async def open_together(path: str, headers: list, count: int = 2) -> list:
    """`count` sockets on one path, opened at the same moment (two tabs of one chat, or a
    chat and the page's health probe, start their channel-layer receivers together)."""
    sockets = [
        WebsocketCommunicator(application, path, headers=[origin_header(), *headers])
        for _ in range(count)
    ]
    results = await asyncio.gather(*(s.connect(timeout=WAIT) for s in sockets))
    assert all(connected for connected, _ in results)
    await asyncio.sleep(0.3)  # their receivers are listening
    return sockets


async def next_event(socket) -> dict:
    return await socket.receive_json_from(timeout=WAIT)


async def record_from_runagentd(stream: str, kind: str, payload: dict) -> int:
    """As runagentd does: store without publishing, then publish from its own loop."""
    event = await database_sync_to_async(record_event)(
        stream=stream, kind=kind, payload=payload, publish_live=False
    )
    await publish(event.as_message())
    return event.seq


@pytest.fixture
async def chat(django_user_model):
    cookie = await session_cookie(django_user_model)
    owner = await django_user_model.objects.aget(username="ada")
    session = await database_sync_to_async(create_session)(title="big", owner=owner)
    return session, [(b"cookie", cookie)]


@pytest.mark.parametrize("size", [10_000, 100_000])
async def test_a_big_chat_message_reaches_every_open_chat_socket_and_the_feed_goes_on(chat, size):
    session, headers = chat
    sockets = await open_together(f"/ws/chat/{session.pk}/", headers)
    text = ("All work and no play. " * (size // 22 + 1))[:size]
    await database_sync_to_async(submit_turn)(session=session, message=text, mode="agent")
    for socket in sockets:
        event = await next_event(socket)
        assert event["kind"] == "user_message"
        assert event["payload"]["content"] == text
    # The reply's end, small: still delivered, so the page leaves "Stop".
    seq = await record_from_runagentd(
        chat_stream(session.pk), "session_status", {"status": "idle", "outcome": "done"}
    )
    for socket in sockets:
        event = await next_event(socket)
        assert (event["id"], event["payload"]["status"]) == (seq, "idle")
        assert await socket.receive_nothing(timeout=0.3)
        await socket.disconnect()


async def test_a_one_megabyte_tool_output_from_runagentd_reaches_the_chat_sockets(chat):
    session, headers = chat
    sockets = await open_together(f"/ws/chat/{session.pk}/", headers, count=3)
    output = "0123456789abcdef\n" * 62_000  # ~1 MB
    stream = chat_stream(session.pk)
    small = await record_from_runagentd(stream, "part_delta", {"delta": "Running it."})
    big = await record_from_runagentd(stream, "part_update", {"tool": "bash", "output": output})
    after = await record_from_runagentd(stream, "session_status", {"status": "idle"})
    for socket in sockets:
        events = [await next_event(socket) for _ in range(3)]
        assert [e["id"] for e in events] == [small, big, after]
        assert events[1]["payload"]["output"] == output
        await socket.disconnect()


async def test_a_research_loop_event_with_a_large_payload_reaches_sse_and_websocket(
    agentsys_config,
):
    agentsys_config(api_token=TOKEN)
    sockets = await open_together("/ws/agents/events/", [(b"x-auth-token", TOKEN.encode())])
    sse = SSEClient(headers=[(b"x-auth-token", TOKEN.encode())])
    assert (await sse.start())[0] == 200
    log = [{"iteration": n, "summary": f"tried lr={n}; loss went down " * 40} for n in range(100)]
    payload = {"iteration": 100, "log": log}
    assert len(json.dumps(payload)) > 100_000
    seq = await record_from_runagentd(AGENTS_STREAM, "iteration", payload)
    for socket in sockets:
        event = await next_event(socket)
        assert (event["id"], event["kind"], event["payload"]) == (seq, "iteration", payload)
    event = await sse.event()
    assert (event["id"], event["payload"]) == (seq, payload)
    # The feeds go on: the loop's next, small event arrives too.
    done = await record_from_runagentd(AGENTS_STREAM, "agent_finished", {"status": "done"})
    for socket in sockets:
        assert (await next_event(socket))["id"] == done
        await socket.disconnect()
    assert (await sse.event())["id"] == done
    await sse.close()


def _listen_connections() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND query = 'LISTEN channels_postgres_messages;'"
        )
        return cursor.fetchone()[0]


async def test_receivers_starting_together_share_one_listen_connection(channel_layer_on_test_db):
    layer = channel_layer_on_test_db
    before = await database_sync_to_async(_listen_connections)()
    channels = [await layer.new_channel() for _ in range(3)]
    waiting = [asyncio.ensure_future(layer.receive(channel)) for channel in channels]
    # The one LISTEN connection opens in the background (slowly on a busy machine): wait for
    # it, then make sure the three receivers did not open one each.
    deadline = time.monotonic() + WAIT
    while await database_sync_to_async(_listen_connections)() == before:
        assert time.monotonic() < deadline, "no LISTEN connection opened"
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.5)
    assert await database_sync_to_async(_listen_connections)() == before + 1
    # A message over the NOTIFY limit (sent as a row id), then a small one: each once.
    await layer.send(channels[0], {"type": "big", "text": "x" * 20_000})
    assert (await asyncio.wait_for(waiting[0], WAIT))["text"] == "x" * 20_000
    await layer.send(channels[0], {"type": "small"})
    assert (await asyncio.wait_for(layer.receive(channels[0]), WAIT))["type"] == "small"
    for waiter in waiting[1:]:
        assert not waiter.done()
        waiter.cancel()


async def test_small_events_still_travel_inline_and_big_ones_by_reference(
    channel_layer_on_test_db,
):
    from events_app.events import INLINE_LIMIT, layer_message

    small = {"id": 1, "stream": "s", "kind": "k", "payload": {"t": "x" * 100}}
    big = {"id": 2, "stream": "s", "kind": "k", "payload": {"t": "x" * INLINE_LIMIT}}
    assert layer_message(small)["event"] == small
    assert layer_message(big)["event"] == {"id": 2, "stream": "s", "kind": "k", "reference": True}


async def test_a_failing_feed_closes_its_socket_with_a_code_a_server_may_send(
    agentsys_config, monkeypatch
):
    async def broken(stream, after):
        raise RuntimeError("the feed broke")
        yield  # an async generator, as follow_steadily is

    monkeypatch.setattr(consumers, "follow_steadily", broken)
    agentsys_config(api_token=TOKEN)
    [socket] = await open_together(
        "/ws/agents/events/", [(b"x-auth-token", TOKEN.encode())], count=1
    )
    closed = await socket.receive_output(timeout=WAIT)
    assert closed["type"] == "websocket.close"
    # RFC 6455 7.4: an endpoint sends 1000 or 3000-4999 (daphne's autobahn refuses the rest
    # with an exception, which left the socket open and the page on "Stop").
    assert closed["code"] == 1000 or 3000 <= closed["code"] <= 4999
    assert closed["code"] == consumers.CLOSE_SERVER_ERROR
    assert settings.CHANNEL_LAYERS  # the real layer, not a stand-in


async def test_a_process_starting_its_listener_leaves_other_processes_messages_queued(
    channel_layer_on_test_db, settings
):
    """runagentd (re)starting takes the messages queued while it was not listening: only its
    own. The web's were taken too, and its clients saw those events up to 15 s late."""
    from events_app.channel_layer import ReconnectingPostgresChannelLayer

    web = channel_layer_on_test_db
    config = settings.CHANNEL_LAYERS["default"]
    daemon = ReconnectingPostgresChannelLayer(**config.get("CONFIG", {}))
    web_channel = await web.new_channel()
    await web.send(web_channel, {"type": "for the web"})  # queued: nobody listens yet
    taken = await daemon.django_db.retrieve_non_expired_queued_messages()
    assert [channel for _, channel, _, _ in taken] == []
    received = await asyncio.wait_for(web.receive(web_channel), WAIT)
    assert received == {"type": "for the web"}
    own = await daemon.new_channel()
    await daemon.send(own, {"type": "for the daemon"})
    taken = await daemon.django_db.retrieve_non_expired_queued_messages()
    assert [channel for _, channel, _, _ in taken] == [own]
