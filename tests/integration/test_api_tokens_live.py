"""A user's own API token opens the live feeds (WebSocket and SSE), like the env token."""

from __future__ import annotations

import pytest
from channels.db import database_sync_to_async

from accounts_app import services
from tests.integration.test_event_feed import WAIT, SSEClient, record, websocket

pytestmark = [
    pytest.mark.django_db(transaction=True, databases=["default", "channels_postgres"]),
    pytest.mark.usefixtures("channel_layer_on_test_db", "close_db_connections"),
]


@pytest.fixture
def user_token(django_user_model):
    def make():
        user = django_user_model.objects.create_user("ada", password="pw-1234567")
        return services.create_token(user=user, name="feeds")

    return database_sync_to_async(make)


async def test_websocket_takes_a_user_token(user_token, agentsys_config):
    agentsys_config(api_token=None)
    row, token = await user_token()
    await record(n=1)
    communicator = websocket("after=0", headers=[(b"x-auth-token", token.encode())])
    assert (await communicator.connect(timeout=WAIT))[0]
    assert (await communicator.receive_json_from(timeout=WAIT))["id"] == 1
    await communicator.disconnect()
    await database_sync_to_async(services.revoke_token)(token_id=row.pk)
    refused = websocket(headers=[(b"authorization", f"Bearer {token}".encode())])
    await refused.connect(timeout=WAIT)
    assert (await refused.receive_output(timeout=WAIT))["code"] == 4401


async def test_sse_takes_a_user_token(user_token, agentsys_config):
    agentsys_config(api_token=None)
    _, token = await user_token()
    await record(n=1)
    client = SSEClient("after=0", headers=[(b"authorization", f"Bearer {token}".encode())])
    status, _ = await client.start()
    assert status == 200
    assert (await client.event())["id"] == 1
    await client.close()
