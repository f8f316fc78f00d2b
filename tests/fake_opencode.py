"""A fake OpenCode API the project owns, for fast tests of the gateway client: real HTTP on a
local port, the global event stream scripted per test, every request recorded in order."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass, field

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

SESSION = "ses_fake"


def event(kind: str, **properties) -> dict:
    return {"type": kind, "properties": properties}


def delta(text: str, part="prt_1", message="msg_a", field_name="text", session=SESSION) -> dict:
    return event(
        "message.part.delta",
        sessionID=session,
        messageID=message,
        partID=part,
        field=field_name,
        delta=text,
    )


def snapshot(text: str, part="prt_1", message="msg_a", kind="text", session=SESSION) -> dict:
    return event(
        "message.part.updated",
        part={"id": part, "messageID": message, "sessionID": session, "type": kind, "text": text},
    )


def status(kind: str, session=SESSION, **extra) -> dict:
    return event("session.status", sessionID=session, status={"type": kind, **extra})


def message(role: str, message_id: str, session=SESSION) -> dict:
    return event("message.updated", info={"id": message_id, "role": role, "sessionID": session})


@dataclass
class FakeOpenCode:
    events: list[tuple[float, dict]] = field(default_factory=list)  # (delay, payload)
    drop_after_events: bool = False  # close the stream instead of keeping it open
    unauthorized: bool = False
    prompt_status: int = 204
    requests: list[tuple[str, str, str]] = field(default_factory=list)  # method, path, auth

    def __post_init__(self):
        self._prompted = asyncio.Event()
        self.app = Starlette(
            routes=[
                Route("/global/health", self._health),
                Route("/global/event", self._events),
                Route("/session", self._create, methods=["POST"]),
                Route("/session/{sid}/prompt_async", self._prompt, methods=["POST"]),
                Route("/session/{sid}/abort", self._abort, methods=["POST"]),
            ]
        )
        self.app.add_middleware(_Recorder, fake=self)

    def paths(self) -> list[str]:
        return [f"{method} {path}" for method, path, _ in self.requests]

    async def _health(self, request: Request):
        return JSONResponse({"healthy": True, "version": "fake"})

    async def _create(self, request: Request):
        return JSONResponse({"id": SESSION, "title": "New session"})

    async def _prompt(self, request: Request):
        self._prompted.set()  # the server's one event loop: the stream sees it at once
        return Response(status_code=self.prompt_status)

    async def _abort(self, request: Request):
        return JSONResponse(True)

    async def _events(self, request: Request):

        async def stream():
            yield "data: " + json.dumps({"payload": event("server.connected")}) + "\n\n"
            await self._prompted.wait()
            for delay, payload in self.events:
                await asyncio.sleep(delay)
                yield "data: " + json.dumps({"directory": "/w", "payload": payload}) + "\n\n"
            if self.drop_after_events:
                return
            while True:
                await asyncio.sleep(3600)

        return StreamingResponse(stream(), media_type="text/event-stream")

    def serve(self) -> str:
        config = uvicorn.Config(
            self.app, host="127.0.0.1", port=0, log_level="error", lifespan="off"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started and time.monotonic() < deadline:
            time.sleep(0.01)
        port = self._server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        self._server.should_exit = True
        self._server.force_exit = True
        self._thread.join(5)


class _Recorder:
    def __init__(self, app, fake: FakeOpenCode):
        self.app, self.fake = app, fake

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            auth = headers.get(b"authorization", b"").decode()
            self.fake.requests.append((scope["method"], scope["path"], auth))
            if self.fake.unauthorized:
                await Response(status_code=401)(scope, receive, send)
                return
        await self.app(scope, receive, send)
