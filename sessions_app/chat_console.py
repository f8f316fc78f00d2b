"""What `manage.py chat` prints of a streaming reply: the text a person reads, with the
model's action tags (`<spawn_research>…</spawn_research>`) taken out as they stream, and each
action carried out said as one line. The browser does the same (static/js/chat.js)."""

from __future__ import annotations

import re

from agentsys.chat.actions import KINDS
from agentsys.chat.tag_values import ATTRIBUTES

_NAMES = "|".join(KINDS)
# An action tag's opening (attributes and all, "/" when it closes itself), as actions.py reads it.
_OPEN = re.compile(rf"<\s*({_NAMES})({ATTRIBUTES})\s*(/?)>", re.IGNORECASE)
# The start of one, cut off by the end of a delta: after the name, attributes so far.
_UNFINISHED = re.compile(
    rf"<\s*(?:{_NAMES})(?:{ATTRIBUTES})"
    r"""(?:\s+[A-Za-z_][\w.-]*(?:\s*=\s*(?:"[^"]*|'[^']*|[^\s"'<>/=`]*))?)?\s*/?$""",
    re.IGNORECASE,
)


def _could_open(tail: str) -> bool:
    """Whether `tail` (from a '<' to the end) may still grow into an action tag."""
    lowered = "<" + tail[1:].lstrip().lower()
    if any(("<" + kind).startswith(lowered) for kind in KINDS):
        return True
    return bool(_UNFINISHED.match(lowered))


class ActionTagFilter:
    """Feed it a text part's deltas; it returns what to print now. A tag split over deltas is
    held back until it is known; a tag never closed hides the rest of the part, as on the
    page (the action line says what it asked for), unless it has attributes: such a tag
    stands alone, and what follows it is printed at the end of the part."""

    def __init__(self) -> None:
        self.pending = ""
        self.inside: str | None = None
        self.alone = False  # the tag inside has attributes: it may stand alone
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
                if not found.group(3):
                    self.inside = found.group(1).lower()
                    self.alone = bool(found.group(2).strip())
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
        rest = "" if self.inside is not None and not self.alone else self.pending
        text = (self.held + rest).rstrip()
        self.pending, self.inside, self.held = "", None, ""
        return text


def _short(text: str, limit: int = 160) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def action_line(payload: dict) -> str:
    """One l1_action result as a sentence: what was started, steered or stopped, or why not;
    a note on it (WILD mode's loop started for an answer that named none) on a line below."""
    line = _what_was_done(payload)
    return line + (f"\n    Note: {payload['note']}" if payload.get("note") else "")


def _what_was_done(payload: dict) -> str:
    action, agent = payload.get("action", ""), payload.get("agent_id") or ""
    target = payload.get("experiment_id") or agent
    if payload.get("error"):
        asked = {
            "spawn_research": "start a research loop",
            "spawn_command": "run the command",
            "steer_child": f"steer {target}",
            "stop_child": f"stop {target}",
        }.get(action)
        if asked is None:  # a tag the agent does not know: the error names the known ones
            return f"→ Not carried out: {_short(payload['error'], 300)}"
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
