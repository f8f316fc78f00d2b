"""A script for the scripted LLM: which reply each request gets.

{"turns": [turn, ...], "default": turn?}; a turn is {"match"?: regex, "steps": [step, ...]}
and a step one of {"text"}, {"reasoning"}, {"tool_call": {"name", "arguments"}},
{"error": {"status", "message"}}, {"stall": seconds}, {"chunk_delay": seconds}, and
{"finish": reason}: the reply's finish_reason (`length` is a reply cut off at the model's
output limit, as real providers send it; default `stop`, or `tool_calls` after a call).

A request is answered by the first unused turn whose `match` is found in its last user
message (a turn without `match` takes any). OpenCode continuing after a tool result sends the
same last user message again, so turns with the same match answer a tool call and then the
text that follows it, in order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

STEP_KINDS = {"text", "reasoning", "tool_call", "error", "stall", "chunk_delay", "finish"}
FINISH_REASONS = {"stop", "length", "content_filter", "tool_calls"}


class BadScript(ValueError):
    pass


@dataclass
class Turn:
    steps: list[dict]
    match: re.Pattern | None = None
    used: bool = False


@dataclass
class Script:
    turns: list[Turn] = field(default_factory=list)
    default: Turn | None = None

    def take(self, last_user_text: str) -> Turn | None:
        for turn in self.turns:
            if not turn.used and (turn.match is None or turn.match.search(last_user_text)):
                turn.used = True
                return turn
        return None


def _turn(raw, where: str) -> Turn:
    if not isinstance(raw, dict) or not isinstance(raw.get("steps"), list):
        raise BadScript(f"{where}: a turn is an object with a list of steps")
    for n, step in enumerate(raw["steps"]):
        if not isinstance(step, dict) or len(step) != 1 or next(iter(step)) not in STEP_KINDS:
            raise BadScript(
                f"{where}.steps[{n}]: each step is one of {', '.join(sorted(STEP_KINDS))}"
            )
        kind, value = next(iter(step.items()))
        if kind in ("text", "reasoning") and not isinstance(value, str):
            raise BadScript(f"{where}.steps[{n}].{kind} must be a string")
        if kind in ("stall", "chunk_delay") and (
            isinstance(value, bool) or not isinstance(value, int | float) or value < 0
        ):
            raise BadScript(f"{where}.steps[{n}].{kind} must be a number of seconds ≥ 0")
        if kind == "tool_call" and not (
            isinstance(value, dict) and isinstance(value.get("name"), str)
        ):
            raise BadScript(f"{where}.steps[{n}].tool_call needs a name")
        if kind == "finish" and value not in FINISH_REASONS:
            raise BadScript(
                f"{where}.steps[{n}].finish must be one of {', '.join(sorted(FINISH_REASONS))}"
            )
        if kind == "error" and not (
            isinstance(value, dict) and isinstance(value.get("status"), int)
        ):
            raise BadScript(f"{where}.steps[{n}].error needs an integer status")
    match = raw.get("match")
    if match is not None:
        try:
            match = re.compile(str(match), re.DOTALL)
        except re.error as error:
            raise BadScript(f"{where}.match is not a valid regex: {error}") from None
    return Turn(steps=raw["steps"], match=match)


def parse_script(raw) -> Script:
    if not isinstance(raw, dict) or not isinstance(raw.get("turns", []), list):
        raise BadScript("a script is an object with a list of turns")
    turns = [_turn(t, f"turns[{i}]") for i, t in enumerate(raw.get("turns", []))]
    default = _turn(raw["default"], "default") if raw.get("default") is not None else None
    return Script(turns=turns, default=default)
