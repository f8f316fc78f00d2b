"""An async client for the OpenCode server: its sessions, prompts and event stream.

A prompt opens the global event stream first, then posts the prompt, then reads events of
its session until it is idle: no event can be missed between the two. Every failure becomes
an OpenCodeError saying what happened; once a prompt was sent, a failure (or the caller
being cancelled) also aborts the OpenCode session, so it does not go on working for nobody.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import quote

import httpx

from agentsys.opencode.errors import (
    OpenCodeAuthError,
    OpenCodeError,
    OpenCodeSessionError,
    OpenCodeStreamLost,
    OpenCodeStuckRetrying,
    OpenCodeTimeout,
    OpenCodeUnavailable,
)
from agentsys.opencode.events import (
    PartRelay,
    PromptAccumulator,
    parse_sse_line,
    steps_of_messages,
)
from agentsys.opencode.timeouts import Timeouts

CALL_TIMEOUT = 30.0  # plain calls (create, abort, health)
ABORT_TIMEOUT = 5.0


@dataclass
class PromptResult:
    text: str
    session_id: str
    reasoning: str = ""
    tool_calls: list[dict] = field(default_factory=list)
    title: str | None = None
    tokens: dict = field(default_factory=dict)
    steps: list[dict] = field(default_factory=list)  # paid model steps (events.step_of)
    duration_s: float = 0.0
    finish: str = ""  # "length": cut off at the model's output limit


class OpenCodeClient:
    def __init__(
        self,
        base_url: str,
        *,
        username: str | None = None,
        password: str | None = None,
        timeouts: Timeouts | None = None,
        directory: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        retry_limit_s: float = 90.0,
        call_timeout: float = CALL_TIMEOUT,
    ):
        self.base_url = base_url.rstrip("/")
        self.timeouts = timeouts or Timeouts()
        self.directory = directory
        self.retry_limit_s = retry_limit_s
        username = username or "opencode"  # OpenCode's own default user
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            auth=httpx.BasicAuth(username, password) if password else None,
            transport=transport,
            timeout=httpx.Timeout(call_timeout),
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    # -- plain calls -------------------------------------------------------------------------

    async def _call(self, method: str, path: str, **kwargs) -> httpx.Response:
        try:
            response = await self._http.request(method, path, **kwargs)
        except httpx.TimeoutException:
            raise OpenCodeUnavailable(
                f"OpenCode at {self.base_url} did not answer {path}"
            ) from None
        except httpx.HTTPError as error:
            raise OpenCodeUnavailable(
                f"OpenCode at {self.base_url} cannot be reached ({type(error).__name__}: {error})"
            ) from None
        _check_status(response, self.base_url, path)
        return response

    async def health(self) -> dict:
        return (await self._call("GET", "/global/health")).json()

    async def providers(self) -> list[dict]:
        """The providers the server offers (GET /config/providers), each {"id", "name",
        "models": {model_id: {"id", "name", ...}}}."""
        response = await self._call("GET", "/config/providers")
        try:
            providers = response.json()["providers"]
            if not isinstance(providers, list):
                raise TypeError("providers is not a list")
        except (ValueError, KeyError, TypeError) as error:
            raise OpenCodeError(
                f"OpenCode at {self.base_url} answered no provider list: {error}"
            ) from None
        return providers

    async def mcp_status(self, directory: str | None = None) -> dict:
        """OpenCode's MCP servers for `directory` (GET /mcp): {name: {"status", "error"?}}
        as OpenCode answered it (agentsys.mcp.status reads it)."""
        response = await self._call("GET", "/mcp", params=self._where(directory))
        try:
            answer = response.json()
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            raise OpenCodeError(
                f"OpenCode at {self.base_url} answered GET /mcp with no status object: "
                f"{response.text[:120]!r}"
            )
        return answer

    async def mcp_connect(self, name: str, directory: str | None = None) -> bool:
        """POST /mcp/{name}/connect: OpenCode starts that MCP server (again); it never
        restarts one that died by itself."""
        response = await self._call(
            "POST", f"/mcp/{quote(name, safe='')}/connect", params=self._where(directory)
        )
        try:
            return response.json() is True
        except ValueError:
            return False

    async def create_session(self, directory: str | None = None, title: str | None = None) -> str:
        body = {"title": title} if title else {}
        response = await self._call("POST", "/session", params=self._where(directory), json=body)
        try:
            return str(response.json()["id"])
        except (ValueError, KeyError, TypeError):
            raise OpenCodeError("OpenCode answered POST /session without a session id") from None

    async def session_steps(self, session_id: str, directory: str | None = None) -> list[dict]:
        """Every paid step of the session so far (events.steps_of_messages)."""
        return steps_of_messages(await self.messages(session_id, directory))

    async def messages(self, session_id: str, directory: str | None = None) -> list:
        """The session's messages so far, as OpenCode keeps them: [{"info", "parts"}]."""
        return await self._json("GET", f"/session/{session_id}/message", directory)

    async def sessions(self, directory: str | None = None) -> list:
        """The sessions of `directory`'s project: [{"id", "title", ...}]."""
        return await self._json("GET", "/session", directory)

    async def set_title(self, session_id: str, title: str, directory: str | None = None) -> None:
        await self._json("PATCH", f"/session/{session_id}", directory, json={"title": title})

    async def delete_session(self, session_id: str, directory: str | None = None) -> None:
        await self._call("DELETE", f"/session/{session_id}", params=self._where(directory))

    async def message(
        self,
        session_id: str,
        text: str,
        *,
        provider: str,
        model: str,
        agent: str,
        directory: str | None = None,
    ) -> dict:
        """A prompt answered whole, without streaming ({"info", "parts"}), by OpenCode's
        `agent` with every tool off: a side question, such as a title (agentsys.chat.titles).
        Waits as long as the caller's own timeout lets it."""
        body = {
            "model": {"providerID": provider, "modelID": model},
            "agent": agent,
            "tools": {"*": False},
            "parts": [{"type": "text", "text": text}],
        }
        path = f"/session/{session_id}/message"
        answer = await self._json("POST", path, directory, json=body, timeout=None)
        if not isinstance(answer, dict):
            raise OpenCodeError(f"OpenCode answered POST {path} with no message")
        return answer

    async def small_model(self, directory: str | None = None) -> tuple[str, str] | None:
        """OpenCode's `small_model` (provider, model), which it writes titles with, if set."""
        config = await self._json("GET", "/config", directory)
        name = config.get("small_model") if isinstance(config, dict) else None
        provider, _, model = str(name or "").partition("/")
        return (provider, model) if provider and model else None

    async def _json(self, method: str, path: str, directory: str | None, **kwargs):
        response = await self._call(method, path, params=self._where(directory), **kwargs)
        try:
            return response.json()
        except ValueError:
            raise OpenCodeError(f"OpenCode answered {method} {path} with no JSON") from None

    async def abort(self, session_id: str, directory: str | None = None) -> None:
        """Stop whatever the session is doing; never raises (it is called on the way out)."""
        with contextlib.suppress(Exception):
            await self._http.post(
                f"/session/{session_id}/abort",
                params=self._where(directory),
                timeout=ABORT_TIMEOUT,
            )

    async def dispose_directory(self, directory: str) -> None:
        """OpenCode lets go of `directory`: the MCP servers it started there (a process each),
        its state of the directory, and the memory that holds. It keeps them otherwise until
        it stops, for every directory it ever worked in. Never raises (called on the way out);
        the directory's sessions are kept."""
        with contextlib.suppress(Exception):
            await self._http.post(
                "/instance/dispose", params={"directory": directory}, timeout=ABORT_TIMEOUT
            )

    def _where(self, directory: str | None) -> dict:
        directory = directory or self.directory
        return {"directory": directory} if directory else {}

    # -- a prompt ----------------------------------------------------------------------------

    async def prompt(
        self,
        session_id: str,
        text: str,
        *,
        provider: str,
        model: str,
        directory: str | None = None,
        on_part: Callable[[dict], None] | None = None,
    ) -> PromptResult:
        """Send `text` and wait for the whole answer. `on_part` sees the answer grow: each
        {"kind": "delta", "id", "ptype": "text"|"reasoning", "delta"} and each tool part
        {"kind": "tool", "id", "tool", "status", "input", "output", "title", "time"}."""
        started = time.monotonic()
        sent = False
        try:
            async with self._http.stream(
                "GET", "/global/event", timeout=httpx.Timeout(CALL_TIMEOUT, read=None)
            ) as stream:
                _check_status(stream, self.base_url, "/global/event")
                body = {
                    "model": {"providerID": provider, "modelID": model},
                    "parts": [{"type": "text", "text": text}],
                }
                await self._call(
                    "POST",
                    f"/session/{session_id}/prompt_async",
                    params=self._where(directory),
                    json=body,
                )
                sent = True
                acc = await self._read_until_idle(stream, session_id, started, on_part)
        except httpx.HTTPError as error:
            if sent:
                await self.abort(session_id, directory)
                raise OpenCodeStreamLost(
                    f"the event stream from {self.base_url} broke mid-response ({error})"
                ) from None
            raise OpenCodeUnavailable(
                f"OpenCode at {self.base_url} cannot be reached ({type(error).__name__}: {error})"
            ) from None
        except (OpenCodeError, asyncio.CancelledError):
            if sent:
                await asyncio.shield(self.abort(session_id, directory))
            raise
        return PromptResult(
            text=acc.text_of("text"),
            session_id=session_id,
            reasoning=acc.text_of("reasoning"),
            tool_calls=list(acc.tool_calls.values()),
            title=acc.title,
            tokens=acc.tokens,
            steps=acc.steps(),
            duration_s=time.monotonic() - started,
            finish=acc.finish,
        )

    async def _read_until_idle(self, stream, session_id, started, on_part) -> PromptAccumulator:
        acc, relay = PromptAccumulator(session_id), PartRelay()
        lines = stream.aiter_lines()
        while True:
            wait = self._next_wait(acc, started)
            try:
                # asyncio.timeout, not wait_for: Python 3.11's wait_for loses a cancellation
                # (a person's Stop) that comes as the line it waits for arrives, e.g. another
                # session's event on the shared stream; the reply then ran to its end.
                async with asyncio.timeout(wait[0]):
                    line = await anext(lines)
            except StopAsyncIteration:
                raise OpenCodeStreamLost(
                    f"OpenCode at {self.base_url} closed the event stream before the answer "
                    "was complete"
                ) from None
            except TimeoutError:
                if wait[1] == "retry":
                    raise self._stuck(acc) from None
                raise OpenCodeTimeout(wait[1], getattr(self.timeouts, wait[1])) from None
            event = parse_sse_line(line)
            if event is None:
                continue
            acc.feed(event)
            if on_part is not None:
                for update in relay.updates(acc, event):
                    on_part(update)
            if acc.error is not None:
                raise OpenCodeSessionError(*acc.error)
            if acc.retrying_since is not None and (
                time.monotonic() - acc.retrying_since > self.retry_limit_s
            ):
                raise self._stuck(acc)
            if acc.idle and (acc.busy_seen or acc.got_output):
                return acc

    def _next_wait(self, acc: PromptAccumulator, started: float) -> tuple[float, str]:
        """How long to wait for the next line, and which limit that is."""
        elapsed = time.monotonic() - started
        limits = [(self.timeouts.total - elapsed, "total"), (self.timeouts.idle, "idle")]
        if not acc.got_output:
            limits.append((self.timeouts.first_token - elapsed, "first_token"))
        if acc.retrying_since is not None:  # wake up to notice an endless retry
            retrying = time.monotonic() - acc.retrying_since
            limits.append((self.retry_limit_s - retrying, "retry"))
        seconds, which = min(limits)
        return max(seconds, 0.0), which

    def _stuck(self, acc: PromptAccumulator) -> OpenCodeStuckRetrying:
        return OpenCodeStuckRetrying(
            f"the model provider kept failing for {self.retry_limit_s:g} s and OpenCode kept "
            f"retrying: {acc.retry_message or 'no reason given'}"
        )


async def server_health(
    base_url: str, *, username: str, password: str, timeout: float = 1.0
) -> dict:
    """Can agents reach their model server: {"ok": True, "version": …} or {"ok": False,
    "error": why, in words a person acts on}. Never raises."""
    if not base_url:
        return {"ok": False, "error": "OPENCODE_URL is not set (make run sets it)"}
    client = OpenCodeClient(base_url, username=username, password=password, call_timeout=timeout)
    try:
        answer = await client.health()
    except OpenCodeAuthError:
        return {"ok": False, "error": "answered 401 (wrong OPENCODE_SERVER_PASSWORD)"}
    except OpenCodeUnavailable as error:
        return {"ok": False, "error": f"unreachable: {error}"}
    except (OpenCodeError, ValueError) as error:  # a 4xx, or an answer that is not JSON
        return {"ok": False, "error": f"answered an error: {error}"}
    finally:
        await client.aclose()
    version = answer.get("version", "") if isinstance(answer, dict) else ""
    return {"ok": True, "version": str(version)}


def health_now(base_url: str, *, username: str, password: str, timeout: float = 1.0) -> dict | None:
    """For a synchronous caller waiting for a server it started: its health answer, or None
    while it cannot give one yet (not listening, or answering an error)."""

    async def ask() -> dict | None:
        client = OpenCodeClient(
            base_url, username=username, password=password, call_timeout=timeout
        )
        try:
            return await client.health()
        except OpenCodeError:
            return None
        finally:
            await client.aclose()

    return asyncio.run(ask())


def _check_status(response: httpx.Response, base_url: str, path: str) -> None:
    error = _status_error(response, base_url, path)
    if error is not None:
        error.status = response.status_code
        raise error


def _status_error(response: httpx.Response, base_url: str, path: str) -> OpenCodeError | None:
    if response.status_code == 401:
        return OpenCodeAuthError(
            f"OpenCode at {base_url} refused the credentials (401): set "
            "OPENCODE_SERVER_USERNAME / OPENCODE_SERVER_PASSWORD to the server's"
        )
    if response.status_code >= 500:
        return OpenCodeUnavailable(
            f"OpenCode at {base_url} failed on {path}: {response.status_code}"
        )
    if response.status_code >= 400:
        detail = ""
        with contextlib.suppress(Exception):
            detail = response.text[:300] if hasattr(response, "text") else ""
        return OpenCodeError(f"OpenCode refused {path} ({response.status_code}) {detail}".strip())
    return None
