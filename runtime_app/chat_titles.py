"""The chat store's side of a chat's title (agentsys.chat.titles): whether a model has still
to write it, and its written title set with the steps that wrote it, in one transaction."""

from __future__ import annotations

from django.db import transaction

from agentsys.chat.titles import provisional_title
from events_app.events import chat_stream, record_event
from ledger_app.services import record_llm_steps
from runtime_app.store_outage import raising_store_unavailable
from sessions_app.models import ChatSession, ChatTurn

DEFAULT_TITLE = "New chat"


def first_message(session_id: str) -> str:
    turns = ChatTurn.objects.filter(session_id=session_id, synthetic=False).order_by("started_at")
    return turns.values_list("message", flat=True).first() or ""


def title_unwritten(session: ChatSession) -> bool:
    """Its title is still a stand-in (none, or its first message's) that a written one may
    replace; a title the person gave the chat stays theirs."""
    if session.title in ("", DEFAULT_TITLE):
        return True
    return session.title == provisional_title(first_message(session.pk))


@raising_store_unavailable
class ChatTitles:
    @transaction.atomic
    def record_title(self, *, session_id: str, title: str, steps: list[dict]) -> list[dict]:
        """The title step's paid steps go to the ledger as the chat's (its person's), each
        once by its key; the title replaces a stand-in. Returns the event that tells the
        chat's page (`session_title`), if the title changed."""
        session = ChatSession.objects.select_for_update().filter(pk=session_id).first()
        if session is None:  # deleted meanwhile: what it paid for was still spent
            record_llm_steps(steps=steps, chat_session_id=session_id)
            return []
        record_llm_steps(steps=steps, chat_session_id=session_id, user_id=session.owner_id)
        title = title.strip()[:200]
        if not title or title == session.title or not title_unwritten(session):
            return []
        session.title = title
        session.save(update_fields=["title", "updated_at"])
        event = record_event(
            stream=chat_stream(session_id),
            kind="session_title",
            payload={"title": title},
            publish_live=False,
        )
        return [event.as_message()]
