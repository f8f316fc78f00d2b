"""The entries of an `<experiments>` block, read the ways models write them.

- Code fence lines (```yaml, ```json, ```, ~~~) inside the block are dropped: they wrap the
  entries, they are not part of the last field or the last shell line of a command.
- A block whose text starts with `[` or `{` is JSON: an array of experiment objects, one
  object, or `{"experiments": [...]}`; `//` and `/* */` comments and trailing commas are
  tolerated. Keys: goal, command (a string, or a list of shell lines), workdir, parameters,
  gpu_required.
- Otherwise it holds `- goal:` entries with `command:`, `workdir:`, `parameters:` (a JSON
  object, may span lines, or `key: value` lines below it) and `gpu_required:` (a whole
  number ≥ 0). An entry may start with `-`, `*` or a number (`1.`, `1)`), and keys may be in
  markdown bold. `command: |` takes the more-indented lines below it, one shell line each; a
  plain value continued on more-indented lines is folded with spaces (a long command
  wrapped). A value wrapped in backticks or quotes is unwrapped (the results section shows
  commands in backticks, and a backticked command would otherwise run as shell command
  substitution).

A malformed entry is not run; `problems` says which and why.
"""

from __future__ import annotations

import json
import re
import textwrap
from dataclasses import dataclass, field

ENTRY_KEYS = ("goal", "command", "workdir", "parameters", "gpu_required")
_KEY_LINE = re.compile(
    r"^(\s*)(?:(?:[-*+]|\d{1,3}[.)])\s*)?[*_]{0,2}(\w+)[*_]{0,2}\s*:[*_]{0,2}\s*(.*)$"
)
_ENTRY_START = re.compile(r"^\s*(?:[-*+]|\d{1,3}[.)])")
_FENCE_LINE = re.compile(r"^\s*(?:`{3,}|~{3,})[\w+.-]*\s*$")
_PARAMETER_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_MAP_LINE = re.compile(r"^\s*[-*]?\s*([A-Za-z0-9_][A-Za-z0-9_.-]*)\s*:\s*(.*?)\s*$")
_EMPTY_PARAMETERS = {"", "{}", "none", "null", "-"}
_NOTHING_WORDS = {"none", "n/a", "-", ""}


@dataclass
class ExperimentSpec:
    goal: str
    command: str
    workdir: str | None = None
    parameters: dict = field(default_factory=dict)
    gpu_required: int = 0


def parse_experiments(block: str) -> tuple[list[ExperimentSpec], list[str]]:
    specs, problems = [], []
    body = "\n".join(line for line in block.splitlines() if not _FENCE_LINE.match(line))
    if body.strip()[:1] in ("[", "{"):
        entries = _json_entries(body, problems)
    else:
        entries = _entries(body)
        if not entries and body.strip().lower().strip(".") not in _NOTHING_WORDS:
            problems.append(
                "<experiments> held no `- goal:` entries (nor a JSON array of them); "
                "nothing was run"
            )
    for number, values in enumerate(entries, start=1):
        spec = _spec(number, values, problems)
        if spec is not None:
            specs.append(spec)
    return specs, problems


# -- JSON -------------------------------------------------------------------------------------


_JSON_SPACE = re.compile(r"\s*")


def _lenient_json(text: str):
    """json.loads after dropping comments, then trailing commas, outside strings."""
    return json.loads(_outside_strings(_outside_strings(text, "/"), ","))


def _outside_strings(text: str, mark: str) -> str:
    """`text` without its comments (`mark` "/") or its trailing commas (`mark` ","), strings
    kept as they are. A plain scan, linear however the text is broken (an unclosed string,
    thousands of `/*`)."""
    special = re.compile(f'["{mark}]')
    kept, position, end = [], 0, len(text)
    while found := special.search(text, position):
        start = found.start()
        kept.append(text[position:start])
        position = start + 1
        if text[start] == '"':
            stop = start + 1
            while stop < end and text[stop] != '"':
                stop += 2 if text[stop] == "\\" else 1
            kept.append(text[start : stop + 1])
            position = stop + 1
        elif text.startswith("//", start):
            newline = text.find("\n", start)
            position = end if newline < 0 else newline
        elif text.startswith("/*", start):
            close = text.find("*/", start + 2)
            position = end if close < 0 else close + 2
        elif mark == ",":
            after = _JSON_SPACE.match(text, start + 1).end()
            if text[after : after + 1] not in ("]", "}"):  # else a trailing comma: dropped
                kept.append(",")
        else:
            kept.append(text[start])  # a lone "/"
    kept.append(text[position:])
    return "".join(kept)


def _json_entries(body: str, problems: list[str]) -> list[dict[str, str]]:
    try:
        data = _lenient_json(body.strip())
    except (ValueError, RecursionError) as error:
        problems.append(
            f"<experiments> looked like JSON but could not be read ({error}); nothing was run. "
            'Write a JSON array like [{"goal": "…", "command": "…", "gpu_required": 0}] '
            "or `- goal:` entries"
        )
        return []
    if isinstance(data, dict):
        data = data.get("experiments", [data])
    if not isinstance(data, list):
        problems.append("<experiments> JSON must be an array of experiment objects; nothing ran")
        return []
    entries = []
    for number, item in enumerate(data, start=1):
        if not isinstance(item, dict):
            problems.append(f"experiment {number}: not a JSON object ({str(item)[:60]!r}); skipped")
            continue
        item = {str(key).lower(): value for key, value in item.items()}
        entries.append({key: _raw(key, item[key]) for key in ENTRY_KEYS if key in item})
    return entries


def _raw(key: str, value) -> str:
    """A JSON value as the text the `- goal:` form would have held."""
    if key == "parameters" and not isinstance(value, str):
        return json.dumps(value)
    if key == "command" and isinstance(value, list):
        return "\n".join(str(line) for line in value)
    return "" if value is None else str(value)


# -- `- goal:` entries ------------------------------------------------------------------------


def _unwrap(value: str) -> str:
    value = value.strip()
    for quote in ("`", '"', "'"):
        if len(value) >= 2 and value[0] == value[-1] == quote and quote not in value[1:-1]:
            return value[1:-1].strip()
    return value


def _entries(block: str) -> list[dict[str, str]]:
    """The entries as {key: raw value}. A new entry starts at a `- goal:` (or `1. goal:`)
    line or at a key the current entry already has (so entries written with or without
    dashes, and with a dash before every field, all split right). Lines that are neither a
    field nor its continuation (a note between fields) are ignored."""
    entries: list[dict[str, str]] = []
    key, indent, style = None, 0, "plain"
    for line in block.splitlines():
        if not line.strip():
            continue
        deeper = len(line) - len(line.lstrip()) > indent
        match = _KEY_LINE.match(line)
        if match and match.group(2).lower() in ENTRY_KEYS and not (style != "plain" and deeper):
            name, value = match.group(2).lower(), (match.group(3) or "").strip()
            starts = _ENTRY_START.match(line) and name == "goal"
            if not entries or starts or name in entries[-1]:
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


def _parameters(raw: str):
    """The parameters as JSON, or as `key: value` lines (each value JSON if it reads as
    JSON, else a string). Raises ValueError when neither."""
    if raw.lower() in _EMPTY_PARAMETERS:
        return {}
    try:
        return json.loads(raw)
    except ValueError:
        lines = [_MAP_LINE.match(line) for line in raw.splitlines() if line.strip()]
        if not lines or raw.lstrip()[:1] in "{[" or not all(lines):
            raise
        return {m.group(1): _scalar(m.group(2)) for m in lines if m}


def _scalar(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return _unwrap(text)


def _spec(number: int, values: dict[str, str], problems: list[str]) -> ExperimentSpec | None:
    """The entry as a spec, or None after adding a problem that says what was wrong."""
    goal = _unwrap(values.get("goal", ""))
    name = f"experiment {number} ({goal[:60]!r})"
    command = _unwrap(textwrap.dedent(values.get("command", "")))
    if not command:
        problems.append(f"{name}: no command; it was not run")
        return None
    raw = _unwrap(textwrap.dedent(values.get("parameters", "")))
    try:
        parameters = _parameters(raw)
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
