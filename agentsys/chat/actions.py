"""The action tags of the L1 agent's answer: what to spawn, steer or stop.

Only the model's own answer is parsed (never the prompt it was shown, never the person's
message), and in it only text outside code: a tag in a ``` block or in `backticks` is the
model showing the syntax, not using it. A tag's values are read in any of three forms (the
forms themselves: agentsys.chat.tag_values):
- `key: value` lines; a value runs on over following lines until the next known key, so
  multi-line goals survive, and a value is kept as written (`python -c 'print(1)'` keeps its
  quotes) unless quotes wrap all of it;
- XML attributes: `<spawn_research goal="..." max_iterations="5"/>`, or the same opening tag
  with a body (`key: value` lines that add to the attributes) and its closing tag; an opening
  tag with attributes that is never closed stands alone;
- a JSON object as the body (`{"goal": "...", "max_iterations": 4}`).
A ``` fence around a body is taken off. A tag that cannot be used becomes an action with
`error` saying why, so the person sees it; so does an unknown tag that looks like an action
(`<start_research>`, `<run_experiment>`: see `_looks_like_action`), which names the known tags.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agentsys.chat.tag_values import ATTRIBUTES, read_attributes, read_body
from agentsys.reply_text import outside_code

KINDS = ("spawn_research", "spawn_command", "steer_child", "stop_child")
KEYS = {
    "spawn_research": ("goal", "max_iterations", "workdir"),
    "spawn_command": ("goal", "command", "workdir"),
    "steer_child": ("experiment_id", "context"),
    "stop_child": ("experiment_id",),
}
LIMITS = {"goal": 5000, "command": 10_000, "context": 20_000, "workdir": 1000}
MAX_ACTIONS = 5
EXPERIMENT_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,100}$")
_NAMES = "|".join(KINDS)
# Any opening tag outside code: its name, attributes, and "/" when it closes itself.
_TAG = re.compile(rf"<\s*([A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)*)({ATTRIBUTES})\s*(/?)>")
_KNOWN_OPEN = re.compile(rf"<\s*(?:{_NAMES})(?:\s[^<>]*)?>", re.IGNORECASE)
_SPAWN_RESEARCH = re.compile(rf"<\s*spawn_research\b({ATTRIBUTES})\s*/?>", re.IGNORECASE)
# What an unknown tag's name says when it is an action: a verb, or a thing an action acts on.
_VERBS = {"spawn", "start", "run", "launch", "stop", "steer", "kill", "cancel", "begin"}
_VERBS |= {"create", "execute", "abort", "halt", "terminate", "pause", "resume", "new"}
_THINGS = {"research", "experiment", "experiments", "loop", "command", "child", "job", "task"}
_ACTION_KEYS = re.compile(
    r"^[ \t]*(?:-[ \t]*)?\"?(?:goal|command|experiment_id|max_iterations)\"?[ \t]*[:=]",
    re.IGNORECASE | re.MULTILINE,
)
UNKNOWN = (
    "is not an action tag, so nothing was done with it (the action tags are "
    + ", ".join(f"<{kind}>" for kind in KINDS)
    + ")"
)


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

    @property
    def known(self) -> bool:
        return self.action in KINDS


@dataclass(frozen=True)
class _Block:
    name: str  # lower case: a known kind, or an unknown tag that looks like an action
    start: int
    end: int
    attributes: dict
    body: str | None  # None: never closed


def _looks_like_action(name: str, attributes: dict, body: str) -> bool:
    """An unknown tag the model meant as an action: a name of two or more words, one a verb
    (`<start_research>`, `<run_experiment>`), or a name with a verb or a thing acted on whose
    tag holds an action's key (`<experiments>` with `goal:` lines). `<thinking>` is neither."""
    words = name.split("_")
    if len(words) >= 2 and any(word in _VERBS for word in words):
        return True
    if not any(word in _VERBS or word in _THINGS for word in words):
        return False
    return bool(set(attributes) & {"goal", "command", "experiment_id"}) or bool(
        _ACTION_KEYS.search(body)
    )


def _blocks(text: str, limit: int | None = None, unknown: bool = True) -> list[_Block]:
    """Every known tag outside code, and (`unknown`) every unknown one that looks like an
    action; the first `limit` of them when a limit is given. An unknown tag's body is read for
    a goal but not taken: a known tag inside it still counts."""
    plain = outside_code(text)
    found, position, closes = [], 0, {}  # name -> its next closing tag (None: no more)
    while (limit is None or len(found) < limit) and (match := _TAG.search(plain, position)):
        name, source, alone = match.group(1).lower(), match.group(2), match.group(3)
        if name not in KINDS and not (unknown and set(name.split("_")) & (_VERBS | _THINGS)):
            position = match.end()  # <b>, <thinking>: not an action, and not looked into
            continue
        attributes = read_attributes(text[match.start(2) : match.end(2)]) if source else {}
        close = None
        if not alone:
            known = closes.get(name, False)
            if known is False or (known is not None and known.start() < match.end()):
                pattern = re.compile(rf"</\s*{name}\s*>", re.IGNORECASE)
                closes[name] = pattern.search(plain, match.end())  # reused by the next ones
            close = closes[name]
        if close is not None and name in KINDS and attributes:
            # An opening tag with attributes, never closed before the next action tag,
            # stands alone: the close found belongs to that next tag.
            following = _KNOWN_OPEN.search(plain, match.end(), close.start())
            close = None if following else close
        body = text[match.end() : close.start()] if close else ""
        position = close.end() if close else match.end()
        if name in KINDS:
            if close is None and not alone and not attributes:
                found.append(_Block(name, match.start(), len(text), {}, None))
                break
            found.append(_Block(name, match.start(), position, attributes, body))
        else:
            if _looks_like_action(name, attributes, body):
                found.append(_Block(name, match.start(), position, attributes, body))
            position = match.end()
    return found


def _unknown(block: _Block) -> L1Action:
    """A note naming the known tags; a goal it gives is kept (WILD mode may use it)."""
    values, _ = read_body(KEYS["spawn_research"], block.body or "")
    values.update({k: v for k, v in block.attributes.items() if k in KEYS["spawn_research"]})
    goal = values.get("goal", "")[: LIMITS["goal"]]
    raw = values.get("max_iterations", "").strip()
    iterations = int(raw) if raw.isdigit() and 1 <= int(raw) <= 1000 else None
    error = f"<{block.name}> {UNKNOWN}"
    return L1Action(action=block.name, goal=goal, max_iterations=iterations, error=error)


def _action(block: _Block) -> L1Action:
    kind = block.name
    if kind not in KINDS:
        return _unknown(block)
    if block.body is None:
        return L1Action(action=kind, error=f"<{kind}> is never closed (no </{kind}>)")
    values, problem = read_body(KEYS[kind], block.body)
    if problem:
        return L1Action(action=kind, error=f"{kind}: {problem}")
    values.update({k: v for k, v in block.attributes.items() if k in KEYS[kind]})
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
    actions = [_action(block) for block in _blocks(text or "", limit=MAX_ACTIONS + 1)]
    if len(actions) > MAX_ACTIONS:
        extra = actions[MAX_ACTIONS]
        too_many = f"too many actions in one answer (at most {MAX_ACTIONS}); the rest were "
        actions = [*actions[:MAX_ACTIONS], L1Action(extra.action, error=too_many + "skipped")]
    return actions


def strip_actions(text: str) -> str:
    """The answer as the person reads it: every known tag outside code removed (an unknown
    one stays, as the model wrote it, and its note says it was not used)."""
    text = text or ""
    kept, position = [], 0
    for block in _blocks(text, unknown=False):
        kept.append(text[position : block.start])
        position = block.end
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


def wild_fallback(actions: list[L1Action], answer: str, message: str) -> tuple[L1Action, str]:
    """WILD mode's loop for an answer that started none, and the note saying so: with the
    goal the model wrote where one can be read (a <spawn_research> refused for another
    reason, an unknown tag such as <start_research>), else with the person's message."""
    missing = "WILD mode expects a research loop for every request, but the answer started none"
    refused = [a for a in actions if a.action == "spawn_research" and a.goal]
    unknown = [a for a in actions if not a.known and a.goal]
    if refused or unknown:
        source = (refused or unknown)[0]
        loop = L1Action("spawn_research", goal=source.goal, max_iterations=source.max_iterations)
        return loop, f"{missing}; one was started with the goal it gave in <{source.action}>"
    loop = L1Action("spawn_research", goal=message[: LIMITS["goal"]])
    if _SPAWN_RESEARCH.search(answer or "") and not _SPAWN_RESEARCH.search(outside_code(answer)):
        missing += " (its only <spawn_research> is inside code, which shows a tag without using it)"
    return loop, f"{missing}; one was started with your message as its goal"


def reply_notes(results: list[dict]) -> list[str]:
    """The lines saved under the reply for its carried-out actions (l1_action results): what
    was not carried out and why, and each note on what was done instead, so a reload, the
    API and `manage.py chat` all show them."""
    notes = []
    for result in results:
        if not isinstance(result, dict):
            continue
        notes += [f"_Not carried out: {result['error']}_"] if result.get("error") else []
        notes += [f"_Note: {result['note']}_"] if result.get("note") else []
    return notes
