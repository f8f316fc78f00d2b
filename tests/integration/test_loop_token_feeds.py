"""Issue 34, item 3 (reading): a research loop's token reads what the person who started the
loop may read, on the live chat feed too. Over `ws/chat/<id>/` it follows that person's chat
but not another person's (closed 4404, as an unknown chat), as the API's
`GET /api/sessions/<id>` answers; a token used to see every chat there. The real ASGI
application and channel layer (channels-postgres on the test database)."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator

from research_app.services import start_research
from researchagent.asgi import application
from runtime_app.memory_view import DjangoMemoryView
from sessions_app.consumers import CLOSE_NOT_FOUND
from sessions_app.models import ChatSession
from tests.integration.test_event_feed import origin_header

pytestmark = [
    pytest.mark.django_db(transaction=True, databases=["default", "channels_postgres"]),
    pytest.mark.usefixtures("channel_layer_on_test_db", "close_db_connections"),
]
WAIT = 10  # seconds; a passing test never waits this long


@database_sync_to_async
def two_chats_and_a_loop(django_user_model, workdir: str) -> tuple[str, str, str]:
    """Ada's chat (a loop started from it: its token), Bob's chat."""
    ada = django_user_model.objects.create_user("ada", password="pw-1234567")
    bob = django_user_model.objects.create_user("bob", password="pw-1234567")
    adas = ChatSession.objects.create(owner=ada, title="ada's")
    bobs = ChatSession.objects.create(owner=bob, title="bob's")
    loop = start_research(goal="Tune lr", workdir=workdir, chat_session_id=adas.pk).agent
    token = DjangoMemoryView(loop.id, loop.role, {"sweep": loop.sweep}).issue_api_token()
    return adas.pk, bobs.pk, token


async def opened(session_id: str, token: str) -> WebsocketCommunicator:
    socket = WebsocketCommunicator(
        application,
        f"/ws/chat/{session_id}/",
        headers=[origin_header(), (b"x-auth-token", token.encode())],
    )
    connected, _ = await socket.connect(timeout=WAIT)
    assert connected
    return socket


async def test_a_loops_token_follows_its_owners_chat_not_another_persons(
    django_user_model, tmp_path, settings
):
    settings.AGENTSYS_WORKDIR = tmp_path
    adas, bobs, token = await two_chats_and_a_loop(django_user_model, str(tmp_path))

    theirs = await opened(bobs, token)
    closed = await theirs.receive_output(timeout=WAIT)
    assert (closed["type"], closed["code"]) == ("websocket.close", CLOSE_NOT_FOUND)

    own = await opened(adas, token)
    assert await own.receive_nothing(timeout=0.5)  # open and following, nothing refused
    await own.disconnect()
