"""What `manage.py chat` prints of a streaming reply: the text a person reads, with the
model's action tags (`<spawn_research>…</spawn_research>`) taken out as they stream, and each
action carried out said as one line. The browser does the same (static/js/chat.js)."""

from __future__ import annotations

import re

from agentsys.chat.actions import KINDS

_OPEN = re.compile(r"<(" + "|".join(KINDS) + r")\s*>", re.IGNORECASE)


def _could_open(tail: str) -> bool:
    """Whether `tail` (from a '<' to the end) may still grow into an action tag."""
    lowered = tail.lower()
    for kind in KINDS:
        tag = "<" + kind
        if tag.startswith(lowered):
            return True
        if lowered.startswith(tag) and not lowered[len(tag) :].strip():
            return True
    return False


class ActionTagFilter:
    """Feed it a text part's deltas; it returns what to print now. A tag split over deltas is
    held back until it is known; a tag never closed hides the rest of the part, as on the
    page (the action line says what it asked for)."""

    def __init__(self) -> None:
        self.pending = ""
        self.inside: str | None = None
        self.held = ""  # trailing blank space: shown only if more text follows it

    def feed(self, delta: str) -> str:
        shown = self.held + self._feed(delta)
        text = shown.rstrip()
        self.held = shown[len(text) :]
        return text

    def _feed(self, delta: str) -> str:
        self.pending += delta
        shown: list[str] = []
        while True:
            if self.inside is not None:
                close = re.search(rf"</\s*{self.inside}\s*>\n?", self.pending, re.IGNORECASE)
                if close is None:
                    return "".join(shown)
                self.pending, self.inside = self.pending[close.end() :], None
                continue
            found = _OPEN.search(self.pending)
            if found is not None:
                shown.append(self.pending[: found.start()])
                self.inside = found.group(1).lower()
                self.pending = self.pending[found.end() :]
                continue
            start = self.pending.rfind("<")
            if start != -1 and _could_open(self.pending[start:]):
                shown.append(self.pending[:start])
                self.pending = self.pending[start:]
            else:
                shown.append(self.pending)
                self.pending = ""
            return "".join(shown)

    def flush(self) -> str:
        """The rest of the part (its end: blank space after the last words is dropped)."""
        rest = "" if self.inside is not None else self.pending
        text = (self.held + rest).rstrip()
        self.pending, self.inside, self.held = "", None, ""
        return text


def _short(text: str, limit: int = 160) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def action_line(payload: dict) -> str:
    """One l1_action result as a sentence: what was started, steered or stopped, or why not."""
    action, agent = payload.get("action", ""), payload.get("agent_id") or ""
    target = payload.get("experiment_id") or agent
    if payload.get("error"):
        asked = {
            "spawn_research": "start a research loop",
            "spawn_command": "run the command",
            "steer_child": f"steer {target}",
            "stop_child": f"stop {target}",
        }.get(action, action)
        return f"→ Could not {asked}: {_short(payload['error'])}"
    if action == "spawn_research":
        return f"→ Research loop {agent} started: {_short(payload.get('goal', ''))}"
    if action == "spawn_command":
        return f"→ Command started as {agent}: {_short(payload.get('command', ''))}"
    if action == "steer_child":
        return f"→ Steered {target}: {_short(payload.get('context', ''))}"
    if action == "stop_child":
        return f"→ Stopped {target}"
    return f"→ {action} {agent}".rstrip()
