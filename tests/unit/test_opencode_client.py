"""The OpenCode gateway client against a fake OpenCode the project owns (issue 10 item 1):
the answer built from the event stream, and every failure typed, explained, and followed by
an abort of the OpenCode session."""

import asyncio
import time

import pytest

from agentsys.opencode import (
    OpenCodeAuthError,
    OpenCodeClient,
    OpenCodeError,
    OpenCodeSessionError,
    OpenCodeStreamLost,
    OpenCodeStuckRetrying,
    OpenCodeTimeout,
    OpenCodeUnavailable,
    Timeouts,
)
from agentsys.opencode.client import health_now
from tests.fake_opencode import (
    SESSION,
    FakeOpenCode,
    delta,
    event,
    message,
    snapshot,
    status,
)
from tests.helpers import free_port

ABORT = f"POST /session/{SESSION}/abort"


@pytest.fixture
def fake():
    server = FakeOpenCode()
    server.url = server.serve()
    yield server
    server.stop()


async def ask(fake, *, timeouts=None, password="pw", **kwargs):  # noqa: S107
    client = OpenCodeClient(fake.url, password=password, timeouts=timeouts, **kwargs)
    try:
        return await client.prompt(SESSION, "hello", provider="demo", model="m", directory="/w")
    finally:
        await client.aclose()


def finish(*events):
    return [
        (0, e)
        for e in (status("busy"), *events, status("idle"), event("session.idle", sessionID=SESSION))
    ]


async def test_the_answer_is_the_text_snapshots_with_deltas_as_fallback(fake):
    fake.events = finish(
        message("user", "msg_u"),
        snapshot("hello", part="prt_u", message="msg_u"),  # the prompt itself
        message("assistant", "msg_a"),
        delta("Hel"),
        delta("lo"),
        snapshot("Hello, world", part="prt_1"),
        delta("only ", part="prt_2"),
        delta("deltas", part="prt_2"),
        snapshot("thinking hard", part="prt_r", kind="reasoning"),
    )
    result = await ask(fake)
    assert result.text == "Hello, world\nonly deltas"
    assert result.reasoning == "thinking hard"
    assert result.session_id == SESSION


async def test_other_sessions_sync_wrappers_and_a_second_idle_are_ignored(fake):
    fake.events = [
        (0, status("busy")),
        (0, snapshot("not mine", part="x", session="ses_other")),
        (0, status("idle", session="ses_other")),
        (0, {"type": "sync", "properties": {"event": snapshot("dup")}}),
        (0, snapshot("mine")),
        (0, event("session.updated", info={"id": SESSION, "title": "A title"})),
        (
            0,
            event(
                "message.part.updated",
                part={
                    "id": "prt_t",
                    "messageID": "msg_a",
                    "sessionID": SESSION,
                    "type": "tool",
                    "tool": "bash",
                    "callID": "c1",
                    "state": {"status": "completed", "input": {"cmd": "ls"}, "output": "a.py"},
                },
            ),
        ),
        (0, status("idle")),
        (0, status("idle")),
    ]
    result = await ask(fake)
    assert result.text == "mine" and result.title == "A title"
    assert result.tool_calls == [
        {
            "tool": "bash",
            "call_id": "c1",
            "status": "completed",
            "input": {"cmd": "ls"},
            "output": "a.py",
            "title": None,
        }
    ]


async def test_the_event_stream_opens_before_the_prompt_and_auth_is_sent(fake):
    fake.events = finish(snapshot("ok"))
    await ask(fake, password="s3cret")
    assert fake.paths()[:2] == ["GET /global/event", f"POST /session/{SESSION}/prompt_async"]
    assert all(auth.startswith("Basic ") for _, _, auth in fake.requests)


async def test_a_session_error_is_typed_and_the_session_aborted(fake):
    fake.events = [
        (0, status("busy")),
        (
            0,
            event(
                "session.error",
                sessionID=SESSION,
                error={
                    "name": "APIError",
                    "data": {"message": "model overloaded", "statusCode": 400},
                },
            ),
        ),
    ]
    with pytest.raises(OpenCodeSessionError, match=r"APIError \(400\): model overloaded"):
        await ask(fake)
    assert ABORT in fake.paths()


async def test_wrong_credentials_are_an_auth_error(fake):
    fake.unauthorized = True
    with pytest.raises(OpenCodeAuthError, match="OPENCODE_SERVER_PASSWORD"):
        await ask(fake)


async def test_a_server_that_is_not_there_fails_fast_naming_it():
    url = f"http://127.0.0.1:{free_port()}"
    client = OpenCodeClient(url, password="")
    started = time.monotonic()
    with pytest.raises(OpenCodeUnavailable, match=url):
        await client.prompt(SESSION, "hi", provider="demo", model="m")
    assert time.monotonic() - started < 2
    await client.aclose()


async def test_a_dropped_stream_is_stream_lost_and_aborts(fake):
    fake.events, fake.drop_after_events = [(0, status("busy")), (0, delta("par"))], True
    with pytest.raises(OpenCodeStreamLost, match="closed the event stream"):
        await ask(fake)
    assert ABORT in fake.paths()


async def test_no_first_token_in_time_times_out_and_aborts(fake):
    fake.events = [(0, status("busy"))]
    with pytest.raises(OpenCodeTimeout) as caught:
        await ask(fake, timeouts=Timeouts(first_token=0.3, total=5, idle=5))
    assert caught.value.which == "first_token" and "0.3 s" in str(caught.value)
    assert ABORT in fake.paths()


async def test_a_response_that_never_ends_hits_the_total_timeout(fake):
    fake.events = [(0, status("busy"))] + [(0.1, delta("x")) for _ in range(30)]
    with pytest.raises(OpenCodeTimeout) as caught:
        await ask(fake, timeouts=Timeouts(first_token=5, total=0.5, idle=5))
    assert caught.value.which == "total"
    assert ABORT in fake.paths()


async def test_a_silent_stream_hits_the_idle_timeout(fake):
    fake.events = [(0, status("busy")), (0, delta("x"))]
    with pytest.raises(OpenCodeTimeout) as caught:
        await ask(fake, timeouts=Timeouts(first_token=5, total=5, idle=0.3))
    assert caught.value.which == "idle"


async def test_a_retry_that_never_ends_is_stuck_retrying(fake):
    fake.events = [(0, status("retry", attempt=1, message="rate limited"))]
    with pytest.raises(OpenCodeStuckRetrying, match="rate limited"):
        await ask(fake, retry_limit_s=0.3)
    assert ABORT in fake.paths()


async def test_a_refused_prompt_is_explained(fake):
    fake.prompt_status = 400
    with pytest.raises(Exception, match="refused"):
        await ask(fake)


async def test_a_cancelled_prompt_aborts_the_session(fake):
    fake.events = [(0, status("busy"))]
    task = asyncio.create_task(ask(fake))
    await asyncio.sleep(0.3)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert ABORT in fake.paths()


async def test_providers_are_the_servers_list_or_an_error_saying_what_came_instead():
    import httpx

    answers = {"good": {"providers": [{"id": "demo"}]}, "bad": {"providers": "none"}}

    def answer(request):
        assert request.url.path == "/config/providers"
        return httpx.Response(200, json=answers[request.url.host])

    for host in answers:
        client = OpenCodeClient(f"http://{host}", transport=httpx.MockTransport(answer))
        try:
            if host == "good":
                assert await client.providers() == [{"id": "demo"}]
            else:
                with pytest.raises(OpenCodeError, match="answered no provider list"):
                    await client.providers()
        finally:
            await client.aclose()


async def test_an_error_status_is_kept_on_the_error():
    import httpx

    client = OpenCodeClient(
        "http://x", transport=httpx.MockTransport(lambda request: httpx.Response(404))
    )
    with pytest.raises(OpenCodeError) as raised:
        await client.providers()
    assert raised.value.status == 404
    await client.aclose()


def test_health_now_is_none_while_no_server_answers():
    assert health_now(f"http://127.0.0.1:{free_port()}", username="u", password="p") is None


async def test_a_stop_as_an_event_arrives_is_not_lost():
    """A person's Stop (the turn's task cancelled) in the same tick as the next line of the
    shared event stream (another session's event): the reply stops, it does not run to its
    end. Python 3.11's asyncio.wait_for lost that cancellation (seen: a stopped chat reply
    that went on for 60 s)."""
    from agentsys.opencode.client import OpenCodeClient

    arrived = asyncio.get_running_loop().create_future()

    class SharedStream:
        async def aiter_lines(self):
            yield await arrived  # an event of another session
            await asyncio.sleep(3600)  # this session's reply, stalled
            yield ""

    client = OpenCodeClient("http://127.0.0.1:9")
    reading = asyncio.create_task(
        client._read_until_idle(SharedStream(), "ses_1", time.monotonic(), None)
    )
    await asyncio.sleep(0.01)
    arrived.set_result('data: {"type": "server.heartbeat", "properties": {}}')
    reading.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(reading, 2)
    await client.aclose()
