"""The scripted LLM: an OpenAI-compatible chat-completions server that answers from a script
(tests) or from the demo brain (`--demo`, for a newcomer with no API key). OpenCode is
configured to use it as the provider `demo`.

Side calls OpenCode makes on its own (a session title) are answered without using a turn.
Every request received is kept for tests to read (`GET /_requests`).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from agentsys.scripted_llm.demo import Pace, demo_steps
from agentsys.scripted_llm.script import BadScript, Script, Turn, parse_script

MODEL = "demo-research"
CHUNK_CHARS = 24
DEMO_CHUNK_DELAY = 0.005
NO_MATCH = "(scripted LLM: no scripted turn matched this request)"
CHARS_PER_TOKEN = 4  # the usual rough rate of a BPE tokenizer on English and code


def tokens_in(text: str) -> int:
    return max(1, len(text) // CHARS_PER_TOKEN)


def usage_of(body: dict, produced: str) -> dict:
    """Token counts as a real provider reports them, estimated from the characters: OpenCode
    prices a step from these, so the demo's ledger is not zero."""
    prompt = tokens_in(json.dumps(body.get("messages") or []))
    completion = tokens_in(produced)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _text_of(content) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def last_user_text(body: dict) -> str:
    for message in reversed(body.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            return _text_of(message.get("content"))
    return ""


def title_for(text: str) -> str:
    """A title as a model would write it: for a chat prompt, the person's request (the text
    after its last `[USER] `), else what a research loop is."""
    marker = text.rfind("[USER] ")
    if marker < 0:
        return "Research loop"
    words = text[marker + len("[USER] ") :].split()[:6]
    return " ".join(words).strip(" .?!").capitalize() or "Chat"


def offered_tools(body: dict) -> set[str]:
    """The names of the tools the request offers the model."""
    names = set()
    for tool in body.get("tools") or []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            names.add(function["name"])
    return names


def tool_results(body: dict) -> dict[str, str]:
    """Tool name → the result it gave, for each call made since the last user message."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    called, results = {}, {}
    for message in messages[users[-1] + 1 if users else 0 :]:
        for call in message.get("tool_calls") or []:
            if isinstance(call, dict) and isinstance(call.get("function"), dict):
                called[call.get("id")] = call["function"].get("name")
        name = called.get(message.get("tool_call_id"))
        if message.get("role") == "tool" and isinstance(name, str):
            results[name] = _text_of(message.get("content"))
    return results


def is_title_call(body: dict) -> bool:
    if body.get("tools"):
        return False
    system = " ".join(
        _text_of(m.get("content"))
        for m in body.get("messages") or []
        if isinstance(m, dict) and m.get("role") == "system"
    )
    return "title" in system.lower()


class ScriptedLLM:
    def __init__(
        self, script: dict | None = None, *, demo: bool = False, demo_seconds: float = 0.0
    ):
        self.demo = demo
        self.pace = Pace(demo_seconds)  # the demo's: fast unless a person is to watch it
        self.script: Script = parse_script(script or {"turns": []})
        self.requests: list[dict] = []
        self.base_url = ""
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._completions, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
                Route("/_script", self._load, methods=["POST"]),
                Route("/_requests", self._requests, methods=["GET"]),
                Route("/_reset", self._reset, methods=["POST"]),
            ]
        )

    # -- control -----------------------------------------------------------------------------

    def load(self, script: dict) -> None:
        self.script = parse_script(script)
        self.requests = []

    async def _load(self, request: Request):
        try:
            self.load(await request.json())
        except (BadScript, ValueError) as error:
            return JSONResponse({"error": str(error)}, status_code=400)
        return JSONResponse({"turns": len(self.script.turns)})

    async def _requests(self, request: Request):
        return JSONResponse(self.requests)

    async def _reset(self, request: Request):
        self.load({"turns": []})
        return JSONResponse({})

    async def _models(self, request: Request):
        return JSONResponse({"object": "list", "data": [{"id": MODEL, "object": "model"}]})

    # -- answers -----------------------------------------------------------------------------

    def _turn_for(self, body: dict) -> Turn:
        if is_title_call(body):
            text = title_for(last_user_text(body))
            return self.script.default or Turn(steps=[{"text": text}])
        if self.demo:
            steps = demo_steps(
                last_user_text(body), offered_tools(body), tool_results(body), self.pace
            )
            return Turn(steps=[{"chunk_delay": DEMO_CHUNK_DELAY}, *steps])
        return self.script.take(last_user_text(body)) or Turn(steps=[{"text": NO_MATCH}])

    async def _completions(self, request: Request):
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "the body is not JSON")
        if not isinstance(body, dict):
            return _error(400, "the body must be a JSON object")
        self.requests.append(body)
        turn = self._turn_for(body)
        for step in turn.steps:
            if "error" in step:
                return _error(step["error"]["status"], str(step["error"].get("message", "")))
        if not body.get("stream"):
            return JSONResponse(await _whole(turn, body))
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        return StreamingResponse(_stream(turn, body, include_usage), media_type="text/event-stream")

    # -- serving -----------------------------------------------------------------------------

    def serve_in_thread(self, port: int = 0, host: str = "127.0.0.1") -> str:
        config = uvicorn.Config(self.app, host=host, port=port, log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True, name="scripted-llm")
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the scripted LLM did not start")
            time.sleep(0.01)
        bound = self._server.servers[0].sockets[0].getsockname()[1]
        self.base_url = f"http://{host}:{bound}"
        return self.base_url

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(5)


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse(
        {"error": {"message": message, "type": "scripted_error", "code": status}},
        status_code=status,
    )


def _chunk(body: dict, delta: dict, finish: str | None = None, **extra) -> str:
    data = {
        "id": "chatcmpl-scripted",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": body.get("model") or MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }
    return f"data: {json.dumps(data)}\n\n"


def _finish(turn: Turn, calls: int | list) -> str:
    """The turn's own finish step, else what a provider says after such a reply."""
    given = [step["finish"] for step in turn.steps if "finish" in step]
    return given[-1] if given else ("tool_calls" if calls else "stop")


async def _stream(turn: Turn, body: dict, include_usage: bool):
    delay, calls, produced = 0.0, 0, []
    yield _chunk(body, {"role": "assistant", "content": ""})
    for step in turn.steps:
        kind, value = next(iter(step.items()))
        if kind == "chunk_delay":
            delay = float(value)
        elif kind == "stall":
            await asyncio.sleep(float(value))
        elif kind in ("text", "reasoning"):
            field = "content" if kind == "text" else "reasoning_content"
            for start in range(0, len(value), CHUNK_CHARS):
                yield _chunk(body, {field: value[start : start + CHUNK_CHARS]})
                produced.append(value[start : start + CHUNK_CHARS])
                if delay:
                    await asyncio.sleep(delay)
        elif kind == "tool_call":
            call = {
                "index": calls,
                "id": f"call_{uuid.uuid4().hex[:12]}",
                "type": "function",
                "function": {
                    "name": value["name"],
                    "arguments": json.dumps(value.get("arguments") or {}),
                },
            }
            calls += 1
            produced.append(call["function"]["arguments"])
            yield _chunk(body, {"tool_calls": [call]})
    yield _chunk(body, {}, _finish(turn, calls))
    if include_usage:
        usage = usage_of(body, "".join(produced))
        data = {
            "id": "chatcmpl-scripted",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": body.get("model") or MODEL,
            "choices": [],
            "usage": usage,
        }
        yield f"data: {json.dumps(data)}\n\n"
    yield "data: [DONE]\n\n"


async def _whole(turn: Turn, body: dict) -> dict:
    text, calls = "", []
    for step in turn.steps:
        kind, value = next(iter(step.items()))
        if kind == "stall":
            await asyncio.sleep(float(value))
        elif kind == "text":
            text += value
        elif kind == "tool_call":
            calls.append(
                {
                    "id": f"call_{len(calls)}",
                    "type": "function",
                    "function": {
                        "name": value["name"],
                        "arguments": json.dumps(value.get("arguments") or {}),
                    },
                }
            )
    message = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model") or MODEL,
        "choices": [{"index": 0, "message": message, "finish_reason": _finish(turn, calls)}],
        "usage": usage_of(body, text + json.dumps(calls)),
    }
