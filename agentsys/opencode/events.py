"""OpenCode's global event stream, read for one session.

`parse_sse_line` turns a `data:` line into the event payload ({"type", "properties"}), or
None for anything else (comments, `sync` wrappers, malformed JSON). `PromptAccumulator`
builds the answer to one prompt from the events of its session: the assistant's text parts
in order (the last snapshot of each part wins; streamed deltas fill in a part never
snapshotted), reasoning apart, tool calls with their states, the title, the tokens, and
whether the session is idle again, failed, or retrying.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

IGNORED_TYPES = {"sync"}


def parse_sse_line(line: str) -> dict | None:
    if not line.startswith("data:"):
        return None
    try:
        envelope = json.loads(line[5:].strip())
    except ValueError:
        return None
    if not isinstance(envelope, dict):
        return None
    payload = envelope.get("payload", envelope)
    if not isinstance(payload, dict) or payload.get("type") in IGNORED_TYPES:
        return None
    if not isinstance(payload.get("properties"), dict):
        payload = {**payload, "properties": {}}
    return payload


def session_of(event: dict) -> str | None:
    props = event["properties"]
    for holder in (props, props.get("part"), props.get("info")):
        if isinstance(holder, dict):
            sid = holder.get("sessionID")
            if isinstance(sid, str):
                return sid
    info = props.get("info")
    if event.get("type") == "session.updated" and isinstance(info, dict):
        return info.get("id")
    return None


@dataclass
class PromptAccumulator:
    session_id: str
    parts: dict[str, dict] = field(default_factory=dict)  # part id → {"type", "text"}
    order: list[str] = field(default_factory=list)
    deltas: dict[str, list[str]] = field(default_factory=dict)
    tool_calls: dict[str, dict] = field(default_factory=dict)
    assistant_messages: set[str] = field(default_factory=set)
    user_messages: set[str] = field(default_factory=set)
    title: str | None = None
    tokens: dict = field(default_factory=dict)
    # Each paid model step (a `step-finish` part) by its part id, and the model of each
    # assistant message: what the ledger records (`steps`).
    finished_steps: dict[str, dict] = field(default_factory=dict)
    message_models: dict[str, tuple[str, str]] = field(default_factory=dict)
    idle: bool = False
    busy_seen: bool = False
    error: tuple[str, str, int | None] | None = None
    # Why the model's last message ended, as the provider said ("stop", "tool-calls", and
    # "length" for a reply cut off at its output limit).
    finish: str = ""
    retrying_since: float | None = None
    retry_message: str = ""
    got_output: bool = False

    def feed(self, event: dict) -> None:
        if session_of(event) != self.session_id:
            return
        kind, props = event.get("type"), event["properties"]
        handler = getattr(self, "_on_" + str(kind).replace(".", "_"), None)
        if handler is not None:
            handler(props)

    def _on_message_updated(self, props: dict) -> None:
        info = props.get("info") or {}
        role, message_id = info.get("role"), info.get("id")
        if role == "assistant":
            self.assistant_messages.add(message_id)
            if info.get("modelID"):
                self.message_models[message_id] = (
                    str(info.get("providerID") or ""),
                    str(info["modelID"]),
                )
            if isinstance(info.get("finish"), str) and info["finish"]:
                self.finish = info["finish"]
            error = info.get("error")
            if isinstance(error, dict) and self.error is None:
                self.error = _error_of(error)
        elif role == "user":
            self.user_messages.add(message_id)

    def _on_message_part_updated(self, props: dict) -> None:
        part = props.get("part") or {}
        part_id, kind = part.get("id"), part.get("type")
        if not isinstance(part_id, str) or part.get("messageID") in self.user_messages:
            return
        if kind in ("text", "reasoning"):
            if part_id not in self.parts:
                self.order.append(part_id)
            self.parts[part_id] = {
                "type": kind,
                "text": str(part.get("text") or ""),
                "message": part.get("messageID"),
            }
            self.got_output = self.got_output or bool(part.get("text"))
        elif kind == "tool":
            state = part.get("state") or {}
            self.tool_calls[part_id] = {
                "tool": part.get("tool"),
                "call_id": part.get("callID"),
                "status": state.get("status"),
                "input": state.get("input"),
                "output": state.get("output"),
                "title": state.get("title"),
            }
            self.got_output = True
        elif kind == "step-finish":
            tokens = part.get("tokens")
            if isinstance(tokens, dict):
                self.tokens = tokens
            self.finished_steps[part_id] = part

    def _on_message_part_delta(self, props: dict) -> None:
        part_id, delta = props.get("partID"), props.get("delta")
        if not isinstance(part_id, str) or not isinstance(delta, str):
            return
        if props.get("messageID") in self.user_messages:
            return
        if part_id not in self.parts:
            self.order.append(part_id)
            self.parts[part_id] = {
                "type": props.get("field") or "text",
                "text": None,
                "message": props.get("messageID"),
            }
        self.deltas.setdefault(part_id, []).append(delta)
        self.got_output = True

    def _on_session_status(self, props: dict) -> None:
        status = props.get("status") or {}
        kind = status.get("type")
        if kind == "busy":
            self.busy_seen, self.retrying_since = True, None
        elif kind == "retry":
            self.busy_seen = True
            if self.retrying_since is None:
                self.retrying_since = time.monotonic()
            self.retry_message = str(status.get("message") or "")
        elif kind == "idle":
            self.idle = True

    def _on_session_idle(self, props: dict) -> None:
        self.idle = True

    def _on_session_updated(self, props: dict) -> None:
        title = (props.get("info") or {}).get("title")
        if isinstance(title, str) and title:
            self.title = title

    def _on_session_error(self, props: dict) -> None:
        error = props.get("error")
        self.error = _error_of(error if isinstance(error, dict) else {})

    def steps(self) -> list[dict]:
        """The paid steps of this prompt, in order, as the ledger records them."""
        found = []
        for part in self.finished_steps.values():
            provider, model = self.message_models.get(part.get("messageID"), ("", ""))
            found.append(step_of(part, provider=provider, model=model))
        return found

    def text_of(self, kind: str) -> str:
        pieces = []
        for part_id in self.order:
            part = self.parts[part_id]
            # The prompt itself arrives as a user message's part: never part of the answer.
            if part["type"] != kind or part.get("message") in self.user_messages:
                continue
            snapshot = part["text"]
            pieces.append(snapshot if snapshot is not None else "".join(self.deltas[part_id]))
        return "".join(pieces) if kind == "reasoning" else "\n".join(p for p in pieces if p)


def _count(value) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def step_of(part: dict, *, provider: str = "", model: str = "") -> dict:
    """A `step-finish` part as the ledger records it: its tokens and its cost in USD as
    OpenCode computed them (from the provider's usage and the model's price), keyed by the
    part's id, which is what makes recording it twice record it once."""
    tokens = part.get("tokens") if isinstance(part.get("tokens"), dict) else {}
    cache = tokens.get("cache") if isinstance(tokens.get("cache"), dict) else {}
    cost = part.get("cost")
    cost = float(cost) if isinstance(cost, int | float) and not isinstance(cost, bool) else 0.0
    return {
        "key": str(part.get("id") or ""),
        "message_id": str(part.get("messageID") or ""),
        "opencode_session_id": str(part.get("sessionID") or ""),
        "input_tokens": _count(tokens.get("input")),
        "output_tokens": _count(tokens.get("output")),
        "reasoning_tokens": _count(tokens.get("reasoning")),
        "cache_read_tokens": _count(cache.get("read")),
        "cache_write_tokens": _count(cache.get("write")),
        "usd": max(cost, 0.0),
        "provider": provider,
        "model": model,
    }


def steps_of_messages(messages: list) -> list[dict]:
    """The paid steps of an OpenCode session, read back from its messages (GET
    /session/{id}/message: [{"info", "parts"}]): the same step-finish parts a prompt's event
    stream carries, so the same keys. What a daemon killed before its ledger write lost is
    recorded from here, and what it wrote already is not recorded twice."""
    found = []
    for message in messages if isinstance(messages, list) else []:
        info = message.get("info") if isinstance(message, dict) else None
        parts = message.get("parts") if isinstance(message, dict) else None
        if not isinstance(info, dict) or info.get("role") != "assistant":
            continue
        provider, model = str(info.get("providerID") or ""), str(info.get("modelID") or "")
        for part in parts if isinstance(parts, list) else []:
            if isinstance(part, dict) and part.get("type") == "step-finish" and part.get("id"):
                found.append(step_of(part, provider=provider, model=model))
    return found


def _error_of(error: dict) -> tuple[str, str, int | None]:
    """(name, message, the provider's HTTP status when it answered one)."""
    data = error.get("data") if isinstance(error.get("data"), dict) else {}
    status = data.get("statusCode")
    status = status if isinstance(status, int) and not isinstance(status, bool) else None
    return str(error.get("name") or "UnknownError"), str(data.get("message") or ""), status


@dataclass
class PartRelay:
    """What each event adds to the answer, for a live client: text and reasoning as deltas
    (from `message.part.delta`, or the new end of a snapshot when a provider sends only
    snapshots), and tool parts whole at every state change. Reads the accumulator after it
    was fed, so it agrees with the final answer."""

    sent: dict[str, int] = field(default_factory=dict)  # part id → characters relayed

    def updates(self, acc: PromptAccumulator, event: dict) -> list[dict]:
        if session_of(event) != acc.session_id:
            return []
        kind, props = event.get("type"), event["properties"]
        if kind == "message.part.delta":
            part = acc.parts.get(props.get("partID"))
            if part is None or part.get("message") in acc.user_messages:
                return []
            return self._relayed(props["partID"], part["type"], str(props.get("delta") or ""))
        if kind != "message.part.updated":
            return []
        part = props.get("part") or {}
        part_id = part.get("id")
        if not isinstance(part_id, str) or part.get("messageID") in acc.user_messages:
            return []
        if part.get("type") == "tool" and part_id in acc.tool_calls:
            state = part.get("state") or {}
            return [
                {
                    "kind": "tool",
                    "id": part_id,
                    **acc.tool_calls[part_id],
                    "time": state.get("time"),
                }
            ]
        if part.get("type") in ("text", "reasoning"):
            # A snapshot: only what it adds beyond the text already relayed.
            text = str(part.get("text") or "")
            return self._relayed(part_id, part["type"], text[self.sent.get(part_id, 0) :])
        return []

    def _relayed(self, part_id: str, kind: str, delta: str) -> list[dict]:
        if not delta:
            return []
        self.sent[part_id] = self.sent.get(part_id, 0) + len(delta)
        ptype = "reasoning" if kind == "reasoning" else "text"
        return [{"kind": "delta", "id": part_id, "ptype": ptype, "delta": delta}]
