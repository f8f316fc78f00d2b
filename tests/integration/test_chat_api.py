"""The chat API's answers to bad input (issue 11): clear 4xx, nothing stored, never a 500.
Streaming itself is shown end to end in test_chat_e2e.py."""

from __future__ import annotations

import asyncio
import json

import pytest
from django.contrib.auth import get_user_model

from events_app.events import chat_stream
from events_app.models import Event
from sessions_app import turns
from sessions_app.models import ChatMessage, ChatSession, ChatTurn
from sessions_app.services import create_session

pytestmark = pytest.mark.django_db


@pytest.fixture
def session():
    return create_session(title="t")


def post_chat(api, body):
    return api("post", "/api/chat", raw=json.dumps(body) if not isinstance(body, str) else body)


def test_an_unknown_session_is_404(api):
    response = post_chat(api, {"session_id": "chat-nope", "message": "hi"})
    assert response.status_code == 404


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        ({"message": ""}, 400, "message: must not be empty"),
        ({"message": "   \n"}, 400, "message: must not be empty"),
        ({"message": "x" * 1_000_000}, 400, "over the limit"),
        ({"message": "hi\x00"}, 400, "NUL"),
        ({"message": "hi", "mode": "yolo"}, 400, "mode: must be one of wild, auto, agent"),
        ({"message": "hi", "mood": "auto"}, 422, "mood"),
        ({"message": 5}, 422, "message"),
        ({}, 422, "message"),
    ],
)
def test_bad_messages_get_a_clear_4xx_and_store_nothing(api, session, body, status, says):
    response = post_chat(api, {"session_id": session.pk, **body})
    assert response.status_code == status, response.content
    assert says in response.json()["detail"]
    assert not ChatTurn.objects.exists() and not ChatMessage.objects.exists()


def test_malformed_json_is_a_4xx(api, session):
    response = post_chat(api, '{"session_id": ')
    assert 400 <= response.status_code < 500


def test_a_second_message_while_one_streams_is_409_and_the_first_is_untouched(api, session):
    first = turns.submit_turn(session=session, message="first", mode="auto")
    response = post_chat(api, {"session_id": session.pk, "message": "second"})
    assert response.status_code == 409
    assert "still streaming" in response.json()["detail"]
    assert list(ChatTurn.objects.values_list("id", flat=True)) == [first.id]
    assert list(ChatMessage.objects.values_list("content", flat=True)) == ["first"]


def test_a_turn_stores_the_message_and_its_event_in_order(session):
    turn = turns.submit_turn(session=session, message="hello", mode="wild")
    assert turn.status == "running" and turn.host is None  # for runagentd to claim
    message = ChatMessage.objects.get()
    assert (message.seq, message.role, message.content) == (1, "user", "hello")
    event = Event.objects.get(stream=chat_stream(session.pk))
    assert event.kind == "user_message" and event.payload["turn_id"] == turn.id
    assert turn.after_seq == 0 and event.seq == 1
    session.refresh_from_db()
    assert session.mode == "wild"


def test_stop_with_nothing_streaming_says_so(api, session):
    response = api("post", f"/api/sessions/{session.pk}/stop")
    assert response.status_code == 200 and response.json() == {"stopping": None}


def test_stop_of_an_unclaimed_turn_ends_it_at_once(api, session):
    turn = turns.submit_turn(session=session, message="hello", mode="auto")
    response = api("post", f"/api/sessions/{session.pk}/stop")
    assert response.status_code == 200
    turn.refresh_from_db()
    assert turn.status == "stopped"
    last = Event.objects.filter(stream=chat_stream(session.pk)).order_by("seq").last()
    assert last.kind == "session_status" and last.payload["outcome"] == "stopped"
    # The session takes a new message at once.
    assert turns.submit_turn(session=session, message="again", mode="auto").status == "running"


def test_stop_of_a_claimed_turn_asks_its_daemon(api, session, django_user_model):
    from hosts_app.models import Host

    turn = turns.submit_turn(session=session, message="hello", mode="auto")
    ChatTurn.objects.filter(pk=turn.pk).update(host=Host.objects.create(name="h"))
    assert api("post", f"/api/sessions/{session.pk}/stop").json() == {"stopping": turn.id}
    turn.refresh_from_db()
    assert turn.status == "running" and turn.stop_requested


@pytest.mark.parametrize("after", ["-1", "abc", "1.5", "9" * 30])
def test_stream_with_a_bad_after_is_400(api, session, after):
    response = api("get", f"/api/sessions/{session.pk}/stream?after={after}")
    assert response.status_code == 400 and "after" in response.json()["detail"]


def _body(response) -> list[dict]:
    async def collect():
        return b"".join([chunk async for chunk in response.streaming_content])

    return [json.loads(line) for line in asyncio.run(collect()).splitlines()]


@pytest.mark.django_db(transaction=True)  # the stream reads from other threads
def test_stream_replays_what_a_client_missed_and_ends(api, session, memory_channel_layer):
    turns.submit_turn(session=session, message="one", mode="auto")
    turns.stop_turn(session=session)
    response = api("get", f"/api/sessions/{session.pk}/stream?after=0")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/x-ndjson"
    lines = _body(response)
    assert [(e["seq"], e["type"]) for e in lines] == [(1, "user_message"), (2, "session_status")]
    after_first = api("get", f"/api/sessions/{session.pk}/stream?after=1")
    rest = _body(after_first)
    assert [e["seq"] for e in rest] == [2]


def test_another_persons_session_is_not_found(client, session):
    owner = get_user_model().objects.create_user("owner", password="x")
    ChatSession.objects.filter(pk=session.pk).update(owner=owner)
    get_user_model().objects.create_user("other", password="x")
    client.login(username="other", password="x")
    response = client.post(
        "/api/chat",
        data={"session_id": session.pk, "message": "hi"},
        content_type="application/json",
    )
    assert response.status_code in (403, 404)  # CSRF first for a browser session
    assert client.get(f"/api/sessions/{session.pk}/stream").status_code == 404
