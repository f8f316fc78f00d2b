"""Events recorded on a thread of runagentd are published from its event loop, and the
thread does not wait for them: a memory thread publishing on a loop of its own waited on the
channel layer's pool (which lives on runagentd's loop) after a PostgreSQL restart, and
runagentd's exit hung behind it."""

import asyncio
import threading
import time

import pytest
from channels.layers import get_channel_layer
from django.utils import timezone

from events_app import events
from events_app.models import Event


@pytest.fixture
def daemon_loop(monkeypatch):
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="daemon-loop", daemon=True)
    thread.start()
    monkeypatch.setattr(events, "_live_loop", None)
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    loop.close()


def _event(seq: int) -> Event:
    return Event(
        stream="agents", seq=seq, kind="alert", payload={"n": seq}, created_at=timezone.now()
    )


def test_a_thread_publishes_through_the_daemon_loop_without_waiting(daemon_loop, monkeypatch):
    layer = get_channel_layer()
    sent: list[tuple[str, int, str]] = []
    layer_free = asyncio.Event()

    async def slow_group_send(group, message):
        await layer_free.wait()  # a pool reconnecting after a restart
        sent.append((group, message["event"]["id"], threading.current_thread().name))

    monkeypatch.setattr(layer, "group_send", slow_group_send)
    events.publish_through(daemon_loop)

    writer = threading.Thread(target=lambda: [events.publish(_event(n)) for n in (1, 2)])
    writer.daemon = True
    writer.start()
    writer.join(2)
    assert not writer.is_alive()  # the writer went on at once
    assert sent == []

    daemon_loop.call_soon_threadsafe(layer_free.set)
    deadline = time.monotonic() + 5
    while len(sent) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sorted(event_id for _, event_id, _ in sent) == [1, 2]
    assert {group for group, _, _ in sent} == {events.group_for("agents")}
    assert {thread for _, _, thread in sent} == {"daemon-loop"}


def test_a_closed_loop_loses_only_the_live_copy(daemon_loop, monkeypatch):
    closed = asyncio.new_event_loop()
    closed.close()
    events.publish_through(closed)
    sent = []

    async def group_send(group, message):
        sent.append(message)

    monkeypatch.setattr(get_channel_layer(), "group_send", group_send)
    events.publish(_event(3))  # neither raises nor hangs: readers fill the gap from the table
    assert sent and sent[0]["event"]["id"] == 3
