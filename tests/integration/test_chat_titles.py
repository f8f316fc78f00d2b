"""The chat store's side of a written title (runtime_app.chat_titles): its steps recorded once
as the chat's and its person's, the title replacing only a stand-in, the page told."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from events_app.events import chat_stream
from events_app.models import Event
from ledger_app.models import SpendEntry
from runtime_app.chat_store import DjangoChatStore
from sessions_app import turns
from sessions_app.models import ChatSession
from sessions_app.services import create_session

pytestmark = pytest.mark.django_db
STEP = {"key": "title:prt_1", "input_tokens": 700, "output_tokens": 6, "usd": 0.0021}


def test_a_written_title_is_recorded_once_and_replaces_the_stand_in():
    owner = get_user_model().objects.create_user("ada")
    session = create_session(owner=owner)
    turns.submit_turn(session=session, message="What is in my project?", mode="auto")
    store = DjangoChatStore()
    ChatSession.objects.filter(pk=session.pk).update(title="What is in my project?")
    events = store.record_title(session_id=session.pk, title="Project overview", steps=[STEP])
    assert [e["kind"] for e in events] == ["session_title"]
    assert events[0]["payload"] == {"title": "Project overview"}
    # Again (a restart read the side session back): one entry, and no second event.
    assert store.record_title(session_id=session.pk, title="Project overview", steps=[STEP]) == []
    [entry] = SpendEntry.objects.all()
    assert entry.key == "llm:title:prt_1" and entry.kind == "llm"
    assert (entry.chat_session_id, entry.user_id, entry.chat_turn_id) == (session.pk, owner.pk, "")
    assert ChatSession.objects.get(pk=session.pk).title == "Project overview"
    assert Event.objects.filter(stream=chat_stream(session.pk), kind="session_title").count() == 1


def test_a_title_the_person_gave_stays_and_a_failed_call_is_still_paid_for():
    session = create_session(title="My own name")
    turns.submit_turn(session=session, message="hello", mode="auto")
    store = DjangoChatStore()
    assert store.record_title(session_id=session.pk, title="Greeting", steps=[STEP]) == []
    assert ChatSession.objects.get(pk=session.pk).title == "My own name"
    assert store.record_title(session_id=session.pk, title="", steps=[]) == []
    assert SpendEntry.objects.count() == 1
