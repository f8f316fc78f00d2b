"""A reply that ends while a chat is being read is never lost to the reader. The chat page and
`GET /api/sessions/{id}` read the messages, then the live turn, then (the page) the stream's
position; runagentd may close the turn in between, from its own connection. Read one by one,
the messages were from before the reply and the rest from after it: the page drew no reply
and followed the stream from past its end (the reply showed only on a reload), and the API
said no turn was live with no reply in its messages."""

from __future__ import annotations

import re
import threading

import pytest
from django.db import connection

from agentsys.chat.store import TurnOutcome
from events_app.events import chat_stream
from events_app.models import Event
from runtime_app.chat_store import DjangoChatStore
from sessions_app import turns
from sessions_app.services import create_session

pytestmark = pytest.mark.django_db(transaction=True)
REPLY = "Use 3e-4: it was steadiest."


def _close_the_turn_in_another_connection(turn_id: str) -> None:
    def close():
        try:
            DjangoChatStore().finish_turn(
                turn_id=turn_id, outcome=TurnOutcome(status="done", text=REPLY)
            )
        finally:
            connection.close()

    worker = threading.Thread(target=close)
    worker.start()
    worker.join(10)


def _turn_ends_after_the_messages_are_read(turn_id: str, ended: list):
    def wrapper(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if not ended and "sessions_app_chatmessage" in sql and sql.lstrip().startswith("SELECT"):
            ended.append(True)
            _close_the_turn_in_another_connection(turn_id)
        return result

    return wrapper


def _live_turn(owner):
    session = create_session(owner=owner)
    turn = turns.submit_turn(session=session, message="Which learning rate?", mode="auto")
    return session, turn


def _idle_seq(session) -> int:
    idle = Event.objects.get(stream=chat_stream(session.pk), kind="session_status")
    assert idle.payload["status"] == "idle"
    return idle.seq


def test_the_chat_page_draws_the_reply_or_replays_it(browser):
    session, turn = _live_turn(browser.user)
    ended: list = []
    with connection.execute_wrapper(_turn_ends_after_the_messages_are_read(turn.pk, ended)):
        page = browser.get(f"/chat/{session.pk}/").content.decode()
    assert ended, "the page read no messages: nothing was tested"
    after = int(re.search(r'data-after="(\d+)"', page).group(1))
    assert REPLY in page or after < _idle_seq(session), (
        f"the reply is not drawn and the page follows the stream from {after}, past its end"
    )


def test_the_session_api_has_the_reply_or_its_live_turn(api):
    session, turn = _live_turn(None)
    ended: list = []
    with connection.execute_wrapper(_turn_ends_after_the_messages_are_read(turn.pk, ended)):
        answer = api("get", f"/api/sessions/{session.pk}")
    assert answer.status_code == 200, answer.content
    assert ended, "the API read no messages: nothing was tested"
    body = answer.json()
    replies = [m["content"] for m in body["messages"] if m["role"] == "assistant"]
    assert replies == [REPLY] or body["active_stream"] is not None, body
