"""Reading the model's reply (design doc §3.2): tags, each from its LAST occurrence, since the
stream may echo the prompt (and the examples in it) before the real answer.

Nothing in a reply can make the loop crash: a malformed part is left out and described in
`problems`, which the next prompt shows the model so it can do better.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

SUMMARY_FALLBACK_CHARS = 300
TRUE_WORDS = {"yes", "true", "1"}
_ENTRY_KEYS = ("goal", "command", "workdir", "parameters", "gpu_required")


@dataclass
class ExperimentSpec:
    goal: str
    command: str
    workdir: str | None = None
    parameters: dict = field(default_factory=dict)
    gpu_required: int = 0


@dataclass
class ParsedReply:
    promise: str | None = None
    plan: str | None = None
    summary: str = ""
    experiments: list[ExperimentSpec] = field(default_factory=list)
    reflection: str | None = None
    continue_loop: bool | None = None
    memories: list[tuple[str, str]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def last_tag(text: str, name: str) -> str | None:
    """The content of the last complete `<name>...</name>`, stripped; None when absent."""
    matches = re.findall(rf"<{name}>(.*?)</{name}>", text, re.DOTALL | re.IGNORECASE)
    return matches[-1].strip() if matches else None


def _unclosed(text: str, name: str) -> bool:
    opened = len(re.findall(rf"<{name}>", text, re.IGNORECASE))
    closed = len(re.findall(rf"</{name}>", text, re.IGNORECASE))
    return opened > closed and closed == 0


def parse_reply(text: str) -> ParsedReply:
    text = text if isinstance(text, str) else ""
    reply = ParsedReply()
    for name in ("promise", "plan", "summary", "experiments", "experiment", "reflection"):
        if _unclosed(text, name):
            reply.problems.append(f"<{name}> was opened but never closed with </{name}>")
    promise = last_tag(text, "promise")
    reply.promise = promise.upper() if promise else None
    reply.plan = last_tag(text, "plan") or None
    reply.reflection = last_tag(text, "reflection")
    summary = last_tag(text, "summary")
    reply.summary = summary if summary else _fallback_summary(text)
    cont = last_tag(text, "continue")
    reply.continue_loop = None if cont is None else cont.strip().lower() in TRUE_WORDS
    memories = last_tag(text, "memories")
    reply.memories = parse_memories(memories) if memories else []
    block = last_tag(text, "experiments")
    if block is None:
        block = last_tag(text, "experiment")
    if block:
        reply.experiments, problems = parse_experiments(block)
        reply.problems.extend(problems)
    return reply


def _fallback_summary(text: str) -> str:
    bare = re.sub(r"<(\w+)>.*?</\1>", "", text, flags=re.DOTALL)
    bare = re.sub(r"</?\w+>", "", bare)
    return " ".join(bare.split())[:SUMMARY_FALLBACK_CHARS]


def parse_memories(block: str) -> list[tuple[str, str]]:
    """`- [tag] text` lines (tag lower-cased; `general` when absent); other lines ignored."""
    memories = []
    for line in block.splitlines():
        line = line.strip()
        if not line.startswith(("-", "*")):
            continue
        line = line[1:].strip()
        match = re.match(r"\[([^\]]*)\]\s*(.*)", line)
        tag, body = (match.group(1).strip().lower(), match.group(2)) if match else ("", line)
        if body.strip():
            memories.append((tag or "general", body.strip()))
    return memories


def _entries(block: str) -> list[list[str]]:
    entries: list[list[str]] = []
    for line in block.splitlines():
        if re.match(r"\s*-\s*goal\s*:", line):
            entries.append([re.sub(r"^\s*-\s*", "", line, count=1)])
        elif entries:
            entries[-1].append(line)
    return entries


def _fields(lines: list[str]) -> dict[str, str]:
    """key: value lines; `key: |` starts a block of the more-indented lines that follow."""
    found: dict[str, str] = {}
    key = None
    for line in lines:
        match = re.match(r"\s*(\w+)\s*:\s?(.*)$", line)
        if match and match.group(1) in _ENTRY_KEYS:
            key, value = match.group(1), match.group(2).strip()
            found[key] = "" if value == "|" else value
        elif key is not None and line.strip():
            found[key] = (found[key] + "\n" + line.strip()).strip()
    return found


def parse_experiments(block: str) -> tuple[list[ExperimentSpec], list[str]]:
    specs, problems = [], []
    entries = _entries(block)
    if not entries and block.strip():
        problems.append("<experiments> held no `- goal:` entries; nothing was run")
    for number, lines in enumerate(entries, start=1):
        values = _fields(lines)
        name = f"experiment {number} ({values.get('goal', '')[:60]!r})"
        if not values.get("command"):
            problems.append(f"{name}: no command; it was not run")
            continue
        try:
            parameters = json.loads(values["parameters"]) if values.get("parameters") else {}
        except ValueError as error:
            problems.append(f"{name}: parameters is not valid JSON ({error}); it was not run")
            continue
        if not isinstance(parameters, dict):
            problems.append(f"{name}: parameters must be a JSON object; it was not run")
            continue
        raw_gpus = values.get("gpu_required", "0") or "0"
        if not re.fullmatch(r"\d{1,4}", raw_gpus.strip()):
            problems.append(
                f"{name}: gpu_required must be a whole number ≥ 0, got {raw_gpus!r}; it was not run"
            )
            continue
        specs.append(
            ExperimentSpec(
                goal=values.get("goal") or values["command"][:80],
                command=values["command"],
                workdir=values.get("workdir") or None,
                parameters=parameters,
                gpu_required=int(raw_gpus),
            )
        )
    return specs, problems
