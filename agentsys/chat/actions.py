"""The action tags of the L1 agent's answer: what to spawn, steer or stop.

Only the model's own answer is parsed (never the prompt it was shown, never the person's
message), and in it only text outside code: a tag in a ``` block or in `backticks` is the
model showing the syntax, not using it. Values are `key: value` lines; a value runs on over
following lines until the next known key, so multi-line goals survive, and a value is kept as
written (`python -c 'print(1)'` keeps its quotes) unless quotes wrap all of it. A tag that
cannot be used becomes an action with `error` saying why, so the person sees it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

KINDS = ("spawn_research", "spawn_command", "steer_child", "stop_child")
KEYS = {
    "spawn_research": ("goal", "max_iterations"),
    "spawn_command": ("goal", "command", "workdir"),
    "steer_child": ("experiment_id", "context"),
    "stop_child": ("experiment_id",),
}
LIMITS = {"goal": 5000, "command": 10_000, "context": 20_000, "workdir": 1000}
MAX_ACTIONS = 5
EXPERIMENT_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,100}$")
_CODE = re.compile(r"```.*?(?:```|\Z)|`[^`\n]*`", re.DOTALL)
_OPEN = re.compile(r"<(spawn_research|spawn_command|steer_child|stop_child)\s*>", re.IGNORECASE)
_KEY_LINE = re.compile(r"^\s*([A-Za-z_]+)\s*:\s?(.*)$")


@dataclass(frozen=True)
class L1Action:
    action: str
    goal: str = ""
    max_iterations: int | None = None
    command: str = ""
    workdir: str = ""
    experiment_id: str = ""
    context: str = ""
    error: str = ""


def _blanked(text: str) -> str:
    """The text with code replaced by spaces: same length, so positions still match."""
    return _CODE.sub(lambda m: " " * len(m.group(0)), text)


def _blocks(text: str) -> list[tuple[str, int, int, str | None]]:
    """(kind, start, end, body or None when never closed) of every tag outside code."""
    plain = _blanked(text)
    found, position = [], 0
    while match := _OPEN.search(plain, position):
        kind = match.group(1).lower()
        close = re.compile(rf"</\s*{kind}\s*>", re.IGNORECASE).search(plain, match.end())
        if close is None:
            found.append((kind, match.start(), len(text), None))
            break
        found.append((kind, match.start(), close.end(), text[match.end() : close.start()]))
        position = close.end()
    return found


def _unquoted(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        inner = value[1:-1]
        if value[0] not in inner:  # the quotes wrap all of it, not two quoted words
            return inner
    return value


def _fields(kind: str, body: str) -> dict[str, str]:
    known, values, current = KEYS[kind], {}, None
    for line in body.splitlines():
        match = _KEY_LINE.match(line)
        key = match.group(1).lower() if match else None
        if key in known:
            current = key
            values[key] = [match.group(2)]
        elif match and current is None:
            continue  # an unknown key before any known one: ignored
        elif current is not None:
            values[current].append(line)
    return {k: _unquoted("\n".join(v)) for k, v in values.items()}


def _action(kind: str, body: str | None) -> L1Action:
    if body is None:
        return L1Action(action=kind, error=f"<{kind}> is never closed (no </{kind}>)")
    values = _fields(kind, body)
    for key, limit in LIMITS.items():
        if len(values.get(key, "")) > limit:
            return L1Action(action=kind, error=f"{kind}: {key} is over {limit} characters")
    problem, iterations = "", None
    if kind == "spawn_research":
        raw = values.get("max_iterations", "").strip()
        if raw:
            if not raw.isdigit() or not 1 <= int(raw) <= 1000:
                problem = f"max_iterations must be a whole number from 1 to 1000, got {raw[:40]!r}"
            else:
                iterations = int(raw)
        if not values.get("goal"):
            problem = problem or "spawn_research needs a goal"
    elif kind == "spawn_command":
        if not values.get("command"):
            problem = "spawn_command needs a command"
        values.setdefault("goal", "")
        values["goal"] = values["goal"] or values.get("command", "")[:80]
    else:
        experiment = values.get("experiment_id", "")
        if not experiment:
            problem = f"{kind} needs an experiment_id"
        elif not EXPERIMENT_ID.match(experiment):
            problem = f"{kind}: {experiment[:60]!r} is not an experiment id"
        elif kind == "steer_child" and not values.get("context"):
            problem = "steer_child needs a context (what the experiment should do differently)"
    return L1Action(
        action=kind,
        goal=values.get("goal", ""),
        max_iterations=iterations,
        command=values.get("command", ""),
        workdir=values.get("workdir", ""),
        experiment_id=values.get("experiment_id", ""),
        context=values.get("context", ""),
        error=problem,
    )


def parse_actions(text: str) -> list[L1Action]:
    actions = [_action(kind, body) for kind, _, _, body in _blocks(text or "")]
    if len(actions) > MAX_ACTIONS:
        extra = actions[MAX_ACTIONS]
        too_many = f"too many actions in one answer (at most {MAX_ACTIONS}); the rest were "
        actions = [*actions[:MAX_ACTIONS], L1Action(extra.action, error=too_many + "skipped")]
    return actions


def strip_actions(text: str) -> str:
    """The answer as the person reads it: every tag block outside code removed."""
    text = text or ""
    kept, position = [], 0
    for _, start, end, _ in _blocks(text):
        kept.append(text[position:start])
        position = end
    kept.append(text[position:])
    return re.sub(r"\n{3,}", "\n\n", "".join(kept)).strip()


def check_mode(action: L1Action, mode: str) -> str:
    """'' when the mode allows the action, else the note the person sees."""
    if mode == "agent":
        return (
            f"AGENT mode never starts, steers or stops agents, so the {action.action} action "
            "was not carried out (switch to AUTO or WILD for that)"
        )
    return ""


def missing_required_spawn(actions: list[L1Action], mode: str) -> str:
    if mode != "wild" or any(a.action == "spawn_research" and not a.error for a in actions):
        return ""
    return "WILD mode expects a research loop for every request, but the answer started none"
