"""Clients of the chat stream for end-to-end tests: NDJSON over HTTP (what a script uses) and
the session's WebSocket (what the browser uses), against a real daphne."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading

import httpx
from websockets.asyncio.client import connect

from tests.live_clients import TOKEN

HEADERS = {"X-Auth-Token": TOKEN}


def new_session(web, **body) -> str:
    response = httpx.post(f"{web.url}/api/sessions", json=body, headers=HEADERS, timeout=10)
    assert response.status_code == 201, response.text
    return response.json()["id"]


def read_ndjson(response: httpx.Response, stop_after: int | None = None) -> list[dict]:
    lines = []
    for line in response.iter_lines():
        if not line.strip():
            continue
        event = json.loads(line)
        if event.get("type") == "keepalive":
            continue
        lines.append(event)
        if stop_after is not None and len(lines) >= stop_after:
            break
    return lines


def chat(web, session_id: str, message: str, mode: str = "auto", timeout: float = 90):
    """POST /api/chat and read the whole NDJSON answer: (status code, events)."""
    body = {"session_id": session_id, "message": message, "mode": mode}
    with httpx.stream(
        "POST", f"{web.url}/api/chat", json=body, headers=HEADERS, timeout=timeout
    ) as response:
        if response.status_code != 200:
            response.read()
            return response.status_code, response.json()
        return 200, read_ndjson(response)


def chat_events(web, session_id: str, message: str, mode: str = "auto", timeout: float = 60):
    """POST /api/chat and yield its events as they arrive; leaving the loop early drops the
    connection mid-answer, as a browser tab that closes does."""
    body = {"session_id": session_id, "message": message, "mode": mode}
    with httpx.stream(
        "POST", f"{web.url}/api/chat", json=body, headers=HEADERS, timeout=timeout
    ) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.strip() and '"keepalive"' not in line:
                yield json.loads(line)


def chat_until(web, session_id: str, message: str, deltas: int) -> list[dict]:
    """The events of an answer up to its `deltas`-th part_delta; then the connection drops."""
    events = []
    for event in chat_events(web, session_id, message):
        events.append(event)
        if sum(e["type"] == "part_delta" for e in events) >= deltas:
            break
    return events


def stream(web, session_id: str, after: int | None = None, timeout: float = 90, stop_after=None):
    params = {} if after is None else {"after": str(after)}
    with httpx.stream(
        "GET",
        f"{web.url}/api/sessions/{session_id}/stream",
        params=params,
        headers=HEADERS,
        timeout=timeout,
    ) as response:
        assert response.status_code == 200, response.read()
        return read_ndjson(response, stop_after=stop_after)


class ChatSocket(threading.Thread):
    """Follows ws/chat/<session>/ from `after` in its own thread; records every frame."""

    def __init__(self, web, session_id: str, after: int = 0):
        super().__init__(daemon=True, name=f"chat-ws-{session_id}")
        self.url = f"ws://127.0.0.1:{web.port}/ws/chat/{session_id}/?after={after}"
        self.received: list[dict] = []
        self.opened = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task = None
        self.start()
        assert self.opened.wait(15), "the chat WebSocket did not open"

    def run(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._task = self._loop.create_task(self._follow())
        with contextlib.suppress(asyncio.CancelledError):
            self._loop.run_until_complete(self._task)

    async def _follow(self) -> None:
        async with connect(
            self.url, additional_headers={**HEADERS, "Origin": "http://127.0.0.1"}
        ) as socket:
            self.opened.set()
            async for frame in socket:
                self.received.append(json.loads(frame))

    def kinds(self) -> list[str]:
        return [m.get("kind") for m in self.received]

    def close(self) -> None:
        if self._loop is not None and self._task is not None:
            self._loop.call_soon_threadsafe(self._task.cancel)
        self.join(5)
