"""The agents event stream, replayed from the table and then live: the feed itself, the
WebSocket (ws/agents/events/) and Server-Sent Events (GET /api/agents/events).

Everything runs on the real channel layer (channels-postgres on the test database) and the
real ASGI application; events are recorded with record_event in committed transactions.
"""

import asyncio
import json

import pytest
from channels.db import database_sync_to_async
from channels.testing import ApplicationCommunicator, WebsocketCommunicator
from channels_postgres.models import GroupChannel
from django.conf import settings
from django.test import Client

from events_app import feed as feed_module
from events_app import live_hub, sse
from events_app.events import AGENTS_STREAM, MESSAGE_TYPE, group_for, record_event
from events_app.feed import follow_stream
from events_app.models import Event
from researchagent.asgi import application

pytestmark = [
    # channels-postgres leaves groups through its own database alias.
    pytest.mark.django_db(transaction=True, databases=["default", "channels_postgres"]),
    pytest.mark.usefixtures("channel_layer_on_test_db", "close_db_connections"),
]
TOKEN = "t0ken-for-tests-0123456789abcdef"
WAIT = 5  # seconds; generous, a passing test never waits this long


async def record(kind="note", **payload) -> int:
    event = await database_sync_to_async(record_event)(
        stream=AGENTS_STREAM, kind=kind, agent_id="orchestrator-0000aaaa", payload=payload
    )
    return event.seq


async def next_of(feed):
    return await asyncio.wait_for(anext(feed), WAIT)


@pytest.fixture
def unpublished(monkeypatch):
    """record_event stores events but does not send them live: the test sends them itself,
    in the order it chooses (two writer processes can deliver out of order)."""
    monkeypatch.setattr("events_app.events.publish", lambda event: None)


async def send_live(layer, seq: int) -> None:
    event = await Event.objects.aget(stream=AGENTS_STREAM, seq=seq)
    await layer.group_send(
        group_for(AGENTS_STREAM), {"type": MESSAGE_TYPE, "event": event.as_message()}
    )


# -- the feed -------------------------------------------------------------------------------


async def test_feed_replays_after_the_resume_point_then_follows_live():
    for n in range(3):
        await record(n=n)
    feed = follow_stream(AGENTS_STREAM, 1, keepalive=WAIT)
    assert [(await next_of(feed))["id"] for _ in range(2)] == [2, 3]
    await record(n=3)
    live = await next_of(feed)
    assert live["id"] == 4
    assert live["payload"] == {"n": 3}
    assert live["kind"] == "note"
    assert live["stream"] == AGENTS_STREAM
    await feed.aclose()
    assert await GroupChannel.objects.acount() == 0  # left the group on close


async def test_many_followers_in_a_process_share_one_subscription():
    """The layer stores and notifies an event once per channel in its group: 50 clients of one
    web process are one channel there, not 50, and each still gets every event once."""
    feeds = [follow_stream(AGENTS_STREAM, 0, keepalive=WAIT) for _ in range(50)]
    await record(n=0)
    assert [(await next_of(feed))["id"] for feed in feeds] == [1] * 50
    assert await GroupChannel.objects.acount() == 1
    assert live_hub.subscriptions() == 1
    await record(n=1)
    assert [(await next_of(feed))["payload"] for feed in feeds] == [{"n": 1}] * 50
    for feed in feeds[:49]:
        await feed.aclose()
    assert await GroupChannel.objects.acount() == 1  # the last one still follows
    await record(n=2)
    assert (await next_of(feeds[49]))["id"] == 3
    await feeds[49].aclose()
    assert await GroupChannel.objects.acount() == 0  # the last to leave left the group
    assert live_hub.subscriptions() == 0


async def test_an_event_sent_before_the_layer_listens_is_read_from_the_table(
    channel_layer_on_test_db, monkeypatch
):
    """channels-postgres reads its queued messages, then LISTENs: on a busy database a second
    may pass in between, and a message sent then never arrives. The feed reads the table only
    once the layer listens, so the event comes at once, not at the next keepalive."""
    layer = channel_layer_on_test_db
    queued = layer.django_db.retrieve_non_expired_queued_messages

    async def slow_to_listen():
        found = await queued()
        await asyncio.sleep(1.0)  # the LISTEN connection comes a second after that read
        return found

    monkeypatch.setattr(layer.django_db, "retrieve_non_expired_queued_messages", slow_to_listen)
    await record(n=1)
    feed = follow_stream(AGENTS_STREAM, 1, keepalive=30)
    first = asyncio.ensure_future(anext(feed))
    await asyncio.sleep(0.3)
    await record(n=2)  # after the queued messages were read, before the LISTEN

    assert (await asyncio.wait_for(first, 3))["id"] == 2
    await feed.aclose()


async def test_event_both_in_table_and_live_is_sent_once(monkeypatch):
    monkeypatch.setattr(feed_module, "REPLAY_BATCH", 2)
    await record(n=1)
    await record(n=2)
    feed = follow_stream(AGENTS_STREAM, 0, keepalive=0.3)
    assert (await next_of(feed))["id"] == 1  # first batch (1, 2) read; subscribed before
    await record(n=3)  # committed and sent live while the replay is still running
    rest = [await next_of(feed) for _ in range(3)]
    assert [m and m["id"] for m in rest] == [2, 3, None]  # 3 from the table, live copy dropped
    await record(n=4)
    assert (await next_of(feed))["id"] == 4
    await feed.aclose()


@pytest.mark.usefixtures("unpublished")
async def test_overtaking_live_event_makes_the_feed_read_the_ones_it_skipped(
    channel_layer_on_test_db,
):
    layer = channel_layer_on_test_db
    await record(n=1)
    feed = follow_stream(AGENTS_STREAM, 0, keepalive=0.5)
    assert (await next_of(feed))["id"] == 1
    await record(n=2)
    await record(n=3)
    await send_live(layer, 3)  # 3 arrives before 2
    assert [(await next_of(feed))["id"] for _ in range(2)] == [2, 3]
    await send_live(layer, 2)  # the late one: already sent, dropped
    await send_live(layer, 3)  # a repeat: dropped
    assert await next_of(feed) is None  # nothing more until the keepalive
    await feed.aclose()


@pytest.mark.usefixtures("unpublished")
async def test_quiet_feed_yields_keepalives_and_finds_events_whose_live_message_was_lost():
    feed = follow_stream(AGENTS_STREAM, 0, keepalive=0.2)
    assert await next_of(feed) is None
    await record(n=1)  # never sent live
    message = await next_of(feed)
    assert message["id"] == 1
    assert await next_of(feed) is None
    await feed.aclose()


async def test_feed_without_a_channel_layer_polls_the_table(settings):
    settings.CHANNEL_LAYERS = {}
    feed = follow_stream(AGENTS_STREAM, 0, keepalive=0.2)
    assert await next_of(feed) is None
    await record(n=1)
    assert (await next_of(feed))["id"] == 1
    await feed.aclose()


# -- WebSocket --------------------------------------------------------------------------------


def origin_header() -> tuple[bytes, bytes]:
    # asgi.py checks Origin against ALLOWED_HOSTS, as a browser would send it.
    host = next((h for h in settings.ALLOWED_HOSTS if h not in ("*", "")), "localhost")
    return (b"origin", f"http://{host.lstrip('.')}".encode())


async def session_cookie(django_user_model) -> bytes:
    def login():
        user = django_user_model.objects.create_user("ada", password="pw-1234567")
        client = Client()
        client.force_login(user)
        name = settings.SESSION_COOKIE_NAME
        return f"{name}={client.cookies[name].value}"

    return (await database_sync_to_async(login)()).encode()


def websocket(query="", headers=()):
    path = "/ws/agents/events/" + (f"?{query}" if query else "")
    return WebsocketCommunicator(application, path, headers=[origin_header(), *headers])


async def test_logged_in_user_gets_new_events_live(django_user_model):
    await record(n=0)  # before the connection: not sent without ?after
    cookie = await session_cookie(django_user_model)
    communicator = websocket(headers=[(b"cookie", cookie)])
    connected, _ = await communicator.connect(timeout=WAIT)
    assert connected
    seq = await record(kind="started", step=1)
    message = await communicator.receive_json_from(timeout=WAIT)
    assert message["id"] == seq == 2
    assert message["kind"] == "started"
    assert message["payload"] == {"step": 1}
    assert message["agent_id"] == "orchestrator-0000aaaa"
    assert await communicator.receive_nothing(timeout=0.3)
    await communicator.disconnect()


async def test_websocket_replays_after_n_then_follows_live_without_gap_or_duplicate(
    agentsys_config,
):
    agentsys_config(api_token=TOKEN)
    for n in range(5):
        await record(n=n)
    communicator = websocket("after=2", headers=[(b"x-auth-token", TOKEN.encode())])
    assert (await communicator.connect(timeout=WAIT))[0]
    replayed = [await communicator.receive_json_from(timeout=WAIT) for _ in range(3)]
    for n in range(5, 8):
        await record(n=n)
    live = [await communicator.receive_json_from(timeout=WAIT) for _ in range(3)]
    assert [m["id"] for m in replayed + live] == [3, 4, 5, 6, 7, 8]
    assert await communicator.receive_nothing(timeout=0.3)
    await communicator.disconnect()
    await asyncio.sleep(0.1)
    assert await GroupChannel.objects.acount() == 0


async def test_websocket_after_zero_replays_everything_and_ignores_what_clients_send(
    agentsys_config,
):
    agentsys_config(api_token=TOKEN)
    await record(n=1)
    communicator = websocket("after=0", headers=[(b"authorization", f"Bearer {TOKEN}".encode())])
    assert (await communicator.connect(timeout=WAIT))[0]
    assert (await communicator.receive_json_from(timeout=WAIT))["id"] == 1
    await communicator.send_to(text_data="not json {")
    await communicator.send_to(bytes_data=b"\x00")
    await record(n=2)
    assert (await communicator.receive_json_from(timeout=WAIT))["id"] == 2  # still open
    await communicator.disconnect()


@pytest.mark.parametrize(
    "headers",
    [
        [],
        [(b"x-auth-token", b"wrong-token")],
        [(b"authorization", b"Bearer wrong-token")],
        [(b"authorization", TOKEN.encode())],  # no "Bearer"
    ],
)
async def test_websocket_without_login_or_token_is_closed_with_4401(agentsys_config, headers):
    agentsys_config(api_token=TOKEN)
    await record(n=1)
    communicator = websocket("after=0", headers=headers)
    assert (await communicator.connect(timeout=WAIT))[0]
    closed = await communicator.receive_output(timeout=WAIT)  # before any event
    assert closed == {"type": "websocket.close", "code": 4401, "reason": "authentication required"}


async def test_websocket_takes_no_token_when_none_is_configured(agentsys_config):
    agentsys_config(api_token=None)
    communicator = websocket(headers=[(b"x-auth-token", b"None")])
    await communicator.connect(timeout=WAIT)
    assert (await communicator.receive_output(timeout=WAIT))["code"] == 4401


async def test_websocket_without_allowed_origin_is_refused(agentsys_config):
    # asgi.py's AllowedHostsOriginValidator, before any consumer: scripts send Origin too.
    agentsys_config(api_token=TOKEN)
    communicator = WebsocketCommunicator(
        application, "/ws/agents/events/", headers=[(b"x-auth-token", TOKEN.encode())]
    )
    assert not (await communicator.connect(timeout=WAIT))[0]


@pytest.mark.parametrize("after", ["abc", "-1", "1.5", "", "9" * 30])
async def test_websocket_bad_after_is_closed_with_4400(agentsys_config, after):
    agentsys_config(api_token=TOKEN)
    communicator = websocket(f"after={after}", headers=[(b"x-auth-token", TOKEN.encode())])
    assert (await communicator.connect(timeout=WAIT))[0]
    error = await communicator.receive_json_from(timeout=WAIT)
    assert "after" in error["error"]
    closed = await communicator.receive_output(timeout=WAIT)
    assert closed == {"type": "websocket.close", "code": 4400, "reason": "bad after"}


# -- Server-Sent Events -----------------------------------------------------------------------


class SSEClient:
    """Drives GET /api/agents/events through the ASGI application and reads its stream."""

    def __init__(self, query="", headers=()):
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": "/api/agents/events",
            "raw_path": b"/api/agents/events",
            "query_string": query.encode(),
            "root_path": "",
            "headers": [(b"host", b"localhost"), *headers],
            "client": ("127.0.0.1", 40000),
            "server": ("localhost", 80),
        }
        self.app = ApplicationCommunicator(application, scope)
        self.buffer = b""

    async def start(self) -> tuple[int, dict[str, str]]:
        await self.app.send_input({"type": "http.request", "body": b"", "more_body": False})
        start = await self.app.receive_output(WAIT)
        headers = {k.decode().lower(): v.decode() for k, v in start["headers"]}
        return start["status"], headers

    async def body(self) -> bytes:
        """The whole body of a response that ends (an error)."""
        chunks = []
        while True:
            message = await self.app.receive_output(WAIT)
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                return b"".join(chunks)

    async def frame(self) -> str:
        """The next SSE message or comment, without its terminating blank line."""
        while b"\n\n" not in self.buffer:
            message = await self.app.receive_output(WAIT)
            assert message["type"] == "http.response.body"
            assert message.get("more_body"), "the stream ended"
            self.buffer += message["body"]
        frame, self.buffer = self.buffer.split(b"\n\n", 1)
        return frame.decode()

    async def event(self) -> dict:
        """The next event; comments (keepalives) are skipped, as EventSource skips them."""
        frame = await self.frame()
        while frame.startswith(":"):
            frame = await self.frame()
        fields = dict(line.split(": ", 1) for line in frame.splitlines())
        data = json.loads(fields["data"])
        assert fields["id"] == str(data["id"])
        assert fields["event"] == data["kind"]
        return data

    async def close(self):
        await self.app.send_input({"type": "http.disconnect"})
        await self.app.wait(WAIT)


@pytest.fixture
def token(agentsys_config):
    agentsys_config(api_token=TOKEN)
    return (b"x-auth-token", TOKEN.encode())


async def test_sse_resumes_after_last_event_id_then_follows_live(token):
    for n in range(4):
        await record(n=n)
    client = SSEClient(headers=[token, (b"last-event-id", b"2")])
    status, headers = await client.start()
    assert status == 200
    assert headers["content-type"].startswith("text/event-stream")
    assert headers["cache-control"] == "no-cache"
    assert headers["x-accel-buffering"] == "no"
    assert [(await client.event())["id"] for _ in range(2)] == [3, 4]
    await record(kind="iteration", n=4)
    live = await client.event()
    assert (live["id"], live["kind"], live["payload"]) == (5, "iteration", {"n": 4})
    await client.close()
    assert await GroupChannel.objects.acount() == 0  # the disconnect closed the feed


async def test_sse_last_event_id_wins_over_after_and_after_works_alone(token):
    for n in range(3):
        await record(n=n)
    client = SSEClient("after=0", headers=[token, (b"last-event-id", b"2")])
    await client.start()
    assert (await client.event())["id"] == 3
    await client.close()
    client = SSEClient("after=1", headers=[token])
    await client.start()
    assert (await client.event())["id"] == 2
    await client.close()


async def test_sse_without_resume_point_sends_only_new_events(token, monkeypatch):
    monkeypatch.setattr(sse, "KEEPALIVE_SECONDS", 0.2)
    await record(n=0)
    client = SSEClient(headers=[(b"authorization", f"Bearer {TOKEN}".encode())])
    assert (await client.start())[0] == 200
    assert await client.frame() == ": keepalive"  # subscribed, nothing old sent
    await record(n=1)
    assert (await client.event())["id"] == 2
    await client.close()


async def test_sse_keepalive_comment_on_a_quiet_stream(token, monkeypatch):
    monkeypatch.setattr(sse, "KEEPALIVE_SECONDS", 0.1)
    client = SSEClient("after=0", headers=[token])
    await client.start()
    assert [await client.frame() for _ in range(3)] == [": keepalive"] * 3
    await client.close()


async def test_sse_logged_in_session_is_enough(django_user_model):
    await record(n=0)
    client = SSEClient("after=0", headers=[(b"cookie", await session_cookie(django_user_model))])
    assert (await client.start())[0] == 200
    assert (await client.event())["id"] == 1
    await client.close()


@pytest.mark.parametrize(
    "headers",
    [[], [(b"x-auth-token", b"wrong")], [(b"authorization", b"Bearer wrong")]],
)
async def test_sse_without_login_or_token_is_401(agentsys_config, headers):
    agentsys_config(api_token=TOKEN)
    client = SSEClient(headers=headers)
    status, response_headers = await client.start()
    assert status == 401
    assert response_headers["content-type"] == "application/json"
    assert json.loads(await client.body()) == {"detail": "Unauthorized"}


@pytest.mark.parametrize(
    ("query", "headers", "complaint"),
    [
        ("", [(b"last-event-id", b"abc")], "Last-Event-ID"),
        ("", [(b"last-event-id", b"-3")], "Last-Event-ID"),
        ("after=1", [(b"last-event-id", b"")], "Last-Event-ID"),
        ("after=x", [], "after"),
        ("after=", [], "after"),
    ],
)
async def test_sse_bad_resume_point_is_400(token, query, headers, complaint):
    client = SSEClient(query, headers=[token, *headers])
    status, _ = await client.start()
    assert status == 400
    assert json.loads(await client.body())["detail"].startswith(complaint)


@pytest.mark.parametrize("method", ["POST", "HEAD", "DELETE"])
async def test_sse_answers_only_get(token, method):
    client = SSEClient(headers=[token])
    client.app.scope["method"] = method
    assert (await client.start())[0] in (403, 405)  # 403: the CSRF check comes first


# -- alerts on the same stream (issue 9 item 11) ----------------------------------------------


def _raise_alert_as_an_executor_does() -> str:
    from runtime_app.memory_view import DjangoMemoryView

    view = DjangoMemoryView("executor-0000bbbb", "executor", {"project": "p"})
    return view.raise_alert(
        severity="critical",
        message="NaN loss detected (step=3).",
        signature="nan",
        data={"step": 3},
    )


def _respond(alert_id: str, response: str):
    return Client().post(
        f"/api/alerts/{alert_id}/respond",
        {"response": response},
        content_type="application/json",
        HTTP_X_AUTH_TOKEN=TOKEN,
    )


async def test_alerts_raised_and_answered_reach_sse_and_websocket_clients_resuming(token):
    before = await record(kind="note")
    alert_id = await database_sync_to_async(_raise_alert_as_an_executor_does)()

    client = SSEClient(headers=[token, (b"last-event-id", str(before).encode())])
    assert (await client.start())[0] == 200
    raised = await client.event()
    assert (raised["id"], raised["kind"], raised["agent_id"]) == (
        before + 1,
        "alert_raised",
        "executor-0000bbbb",
    )
    assert raised["payload"]["alert_id"] == alert_id
    assert raised["payload"]["severity"] == "critical"
    assert raised["payload"]["status"] == "pending"
    answered = await database_sync_to_async(_respond)(alert_id, "acknowledge")
    assert answered.status_code == 200
    resolved = await client.event()  # live
    assert (resolved["id"], resolved["kind"]) == (before + 2, "alert_resolved")
    assert resolved["payload"]["alert_id"] == alert_id
    assert resolved["payload"]["response"] == "acknowledge"
    assert resolved["payload"]["status"] == "resolved"
    await client.close()

    socket = websocket(f"after={before}", headers=[token])
    assert (await socket.connect(timeout=WAIT))[0]
    replayed = [await socket.receive_json_from(timeout=WAIT) for _ in range(2)]
    assert [(m["id"], m["kind"]) for m in replayed] == [
        (before + 1, "alert_raised"),
        (before + 2, "alert_resolved"),
    ]
    await socket.disconnect()


async def test_an_alert_and_its_event_commit_together():
    from django.db import transaction

    from scheduler_app.models import Alert
    from scheduler_app.services import raise_alert

    def raise_then_roll_back():
        with transaction.atomic():
            raise_alert(agent_id="executor-0000cccc", severity="warning", message="spike")
            transaction.set_rollback(True)

    await database_sync_to_async(raise_then_roll_back)()
    assert await Alert.objects.acount() == 0
    assert await Event.objects.filter(kind="alert_raised").acount() == 0
