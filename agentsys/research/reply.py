"""Reading the model's reply: tags, each from its LAST occurrence, since the
stream may echo the prompt (and the examples in it) before the real answer.

- Every prompt template ends with `END_MARKER`; when the reply contains it, only the text after
  its last occurrence is read, so an echoed prompt's example tags can never count.
- `<promise>` is stripped and upper-cased (DONE / WAITING / CONTINUE; markdown emphasis and a
  trailing full stop are dropped). `<continue>` is True only for yes/true/1.
- `<experiments>` (or `<experiment>`) holds `- goal:` entries with `command:`, `workdir:`,
  `parameters:` (a JSON object, may span lines) and `gpu_required:` (a whole number ≥ 0).
  `command: |` takes the more-indented lines below it, one shell line each; a plain value
  continued on more-indented lines is folded with spaces (a long command wrapped). A value
  wrapped in backticks or quotes is unwrapped (the results section shows commands in
  backticks, and a backticked command would otherwise run as shell command substitution).

Nothing in a reply can make the loop crash: a malformed part is left out and described in
`problems`, which the next prompt shows the model so it can do better.
"""

from __future__ import annotations

import json
import re
import textwrap
from dataclasses import dataclass, field

SUMMARY_FALLBACK_CHARS = 300
TRUE_WORDS = {"yes", "true", "1"}
END_MARKER = "<!-- agentsys-prompt-end -->"
TAGS = ("promise", "plan", "summary", "experiments", "experiment", "reflection", "memories")
_ENTRY_KEYS = ("goal", "command", "workdir", "parameters", "gpu_required")
_KEY_LINE = re.compile(r"^(\s*)(?:[-*]\s*)?(\w+)\s*:\s*(.*)$")
_PARAMETER_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_EMPTY_PARAMETERS = {"", "{}", "none", "null", "-"}


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


def _starts(text: str, token: str, end: int | None = None) -> list[int]:
    """Where `token` starts in text[:end], case-insensitively. Positions come from the text
    itself: `text.lower()` may change its length (e.g. "İ")."""
    return [m.start() for m in re.finditer(re.escape(token), text[:end], re.IGNORECASE)]


def _block_span(text: str, name: str) -> tuple[int, int] | None:
    """(content start, content end) of the last complete `<name>...</name>`. The opening tag
    is the last one before the last closing tag, so a tag merely mentioned earlier in prose
    ("answer in a <plan> tag") does not swallow the text up to the block."""
    closes = _starts(text, f"</{name}>")
    if not closes:
        return None
    opens = _starts(text, f"<{name}>", closes[-1])
    if not opens:
        return None
    return opens[-1] + len(name) + 2, closes[-1]


def last_tag(text: str, name: str) -> str | None:
    """The content of the last complete `<name>...</name>`, stripped; None when absent."""
    span = _block_span(text, name)
    return None if span is None else text[span[0] : span[1]].strip()


def _unclosed(text: str, name: str) -> bool:
    """The reply's last `<name>` has no `</name>` after it (a cut-off or forgotten tag)."""
    opens, closes = _starts(text, f"<{name}>"), _starts(text, f"</{name}>")
    return bool(opens) and (not closes or opens[-1] > closes[-1])


def parse_reply(text: str) -> ParsedReply:
    text = text if isinstance(text, str) else ""
    end = text.rfind(END_MARKER)
    if end >= 0 and text[end + len(END_MARKER) :].strip():  # an echo, then the real answer
        text = text[end + len(END_MARKER) :]
    reply = ParsedReply()
    for name in TAGS:
        if _unclosed(text, name):
            reply.problems.append(
                f"<{name}> was opened but never closed with </{name}>; that part was ignored"
            )
    reply.promise = _promise(last_tag(text, "promise"))
    reply.plan = last_tag(text, "plan") or None
    reply.reflection = last_tag(text, "reflection") or None
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


def _promise(raw: str | None) -> str | None:
    if raw is None:
        return None
    word = raw.strip().strip("*_`'\".").strip().upper()
    return word or None


def _fallback_summary(text: str) -> str:
    """The first characters of the text without its tag blocks and tag marks. Linear: a reply
    of thousands of unclosed tags must not take minutes."""
    for name in (*TAGS, "continue"):
        kept, pos = [], 0
        opening = re.compile(re.escape(f"<{name}>"), re.IGNORECASE)
        closing = re.compile(re.escape(f"</{name}>"), re.IGNORECASE)
        while (start := opening.search(text, pos)) and (end := closing.search(text, start.end())):
            kept.append(text[pos : start.start()])
            pos = end.end()
        text = "".join(kept) + text[pos:]
    bare = re.sub(r"</?\w+>", "", text)
    return " ".join(bare.split())[:SUMMARY_FALLBACK_CHARS]


def parse_memories(block: str) -> list[tuple[str, str]]:
    """`- [tag] text` lines (also `*` and `1.` lists; tag lower-cased, `general` when absent);
    blank lines and lines that are not list items are ignored."""
    memories = []
    for line in block.splitlines():
        item = re.match(r"\s*(?:[-*]|\d+[.)])\s+(.*)", line)
        if not item:
            continue
        match = re.match(r"\[([^\]]*)\]\s*(.*)", item.group(1))
        tag, body = (match.group(1).strip().lower(), match.group(2)) if match else ("", item[1])
        if body.strip():
            memories.append((tag or "general", body.strip()))
    return memories


def _unwrap(value: str) -> str:
    value = value.strip()
    for quote in ("`", '"', "'"):
        if len(value) >= 2 and value[0] == value[-1] == quote and quote not in value[1:-1]:
            return value[1:-1].strip()
    return value


def _entries(block: str) -> list[dict[str, str]]:
    """The `- goal:` entries as {key: raw value}. A new entry starts at a `- goal:` line or at
    a key the current entry already has (so entries written with or without dashes, and with
    a dash before every field, all split right). Lines that are neither a field nor its
    continuation (a note between fields) are ignored."""
    entries: list[dict[str, str]] = []
    key, indent, style = None, 0, "plain"
    for line in block.splitlines():
        if not line.strip():
            continue
        deeper = len(line) - len(line.lstrip()) > indent
        match = _KEY_LINE.match(line)
        if match and match.group(2).lower() in _ENTRY_KEYS and not (style != "plain" and deeper):
            name, value = match.group(2).lower(), (match.group(3) or "").strip()
            if not entries or (line.lstrip()[:1] in "-*" and name == "goal") or name in entries[-1]:
                entries.append({})
            key, indent = name, len(match.group(1))
            style = {"|": "lines", "|-": "lines", ">": "folded", ">-": "folded"}.get(value, "plain")
            entries[-1][key] = "" if style != "plain" else value
        elif key is not None and (deeper or key == "parameters" or style != "plain"):
            # a block takes its lines even when the model did not indent them
            entries[-1][key] = _continue(entries[-1][key], line.rstrip(), key, style)
    return entries


def _continue(value: str, line: str, key: str, style: str) -> str:
    """`line` keeps its indentation: a block is dedented as a whole (in `_spec`), so the
    indentation inside a heredoc survives."""
    if style == "lines" or key == "parameters":  # one shell line each; JSON over lines
        return value + "\n" + line if value else line
    return (value.removesuffix("\\").rstrip() + " " + line.strip()).strip()  # folded


def parse_experiments(block: str) -> tuple[list[ExperimentSpec], list[str]]:
    specs, problems = [], []
    entries = _entries(block)
    if not entries and block.strip().lower().strip(".") not in {"none", "n/a", "-"}:
        problems.append("<experiments> held no `- goal:` entries; nothing was run")
    for number, values in enumerate(entries, start=1):
        spec = _spec(number, values, problems)
        if spec is not None:
            specs.append(spec)
    return specs, problems


def _spec(number: int, values: dict[str, str], problems: list[str]) -> ExperimentSpec | None:
    """The entry as a spec, or None after adding a problem that says what was wrong."""
    goal = _unwrap(values.get("goal", ""))
    name = f"experiment {number} ({goal[:60]!r})"
    command = _unwrap(textwrap.dedent(values.get("command", "")))
    if not command:
        problems.append(f"{name}: no command; it was not run")
        return None
    raw = _unwrap(values.get("parameters", ""))
    try:
        parameters = {} if raw.lower() in _EMPTY_PARAMETERS else json.loads(raw)
    except (ValueError, RecursionError) as error:  # RecursionError: absurdly deep nesting
        problems.append(f"{name}: parameters is not valid JSON ({error}); it was not run")
        return None
    if not isinstance(parameters, dict):
        problems.append(
            f'{name}: parameters must be a JSON object like {{"lr": 0.1}}, got {raw[:60]!r}; '
            "it was not run"
        )
        return None
    bad = [key for key in parameters if not _PARAMETER_NAME.fullmatch(key)]
    if bad:
        problems.append(
            f"{name}: parameter names become --name=value options, so they may hold only "
            f"letters, digits, '_', '-' and '.'; got {bad[0]!r}; it was not run"
        )
        return None
    gpus = _unwrap(values.get("gpu_required", "")) or "0"
    if not re.fullmatch(r"\d{1,4}", gpus):
        problems.append(
            f"{name}: gpu_required must be a whole number ≥ 0, got {gpus[:40]!r}; it was not run"
        )
        return None
    workdir = _unwrap(values.get("workdir", ""))
    return ExperimentSpec(
        goal=goal or command[:80],
        command=command,
        workdir=workdir or None,
        parameters=parameters,
        gpu_required=int(gpus),
    )
