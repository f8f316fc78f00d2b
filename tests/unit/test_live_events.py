"""runagentd's live sends leave in order, from a queue: storing an event never waits for
its send (agentsys/live_events.py)."""

import asyncio

from agentsys.live_events import LiveEvents


async def test_a_slow_send_holds_up_no_caller_and_events_leave_in_order():
    sent, channel_free = [], asyncio.Event()

    async def send(event):
        await channel_free.wait()  # a channel layer busy, or reconnecting
        sent.append(event["id"])

    live = LiveEvents(send)
    for n in range(1, 6):
        await asyncio.wait_for(live({"id": n}), 0.1)  # returns at once
    assert sent == []
    channel_free.set()
    await live.flush(1.0)
    assert sent == [1, 2, 3, 4, 5]


async def test_a_failed_send_loses_only_that_event_live():
    sent = []

    async def send(event):
        if event["id"] == 2:
            raise ConnectionError("channel layer down")
        sent.append(event["id"])

    live = LiveEvents(send)
    for n in (1, 2, 3):
        await live({"id": n})
    await live.flush(1.0)
    assert sent == [1, 3]


async def test_the_stop_waits_for_queued_sends_only_so_long():
    async def never(event):
        await asyncio.Event().wait()

    live = LiveEvents(never)
    await live({"id": 1})
    loop = asyncio.get_running_loop()
    began = loop.time()
    await live.flush(0.2)
    assert 0.15 < loop.time() - began < 1.0
