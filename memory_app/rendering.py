"""What a person reads of one memory entry, whatever page shows it (the memory page, a research
loop's page, the admin): a plan as a list, a step's context as its summary with its iteration,
a reflection or a message as text, anything else as labelled fields. Never a Python repr or a
JSON dump: `readable(entry)` is the one place that decides, `entry_text` its one-line form."""

from __future__ import annotations

import json
import re

TASK = re.compile(r"^\s*(?:[-*]|\d+[.)])\s*(?:\[( |x|X)\]\s*)?(.*)$")
TEXT_KEYS = ("text", "message", "context", "output", "summary")
SKIPPED_IN_FIELDS = {"traceback"}  # kept in the record; too long to read in a list
FIELD_CHARS = 300


def plan_items(text: str) -> list[dict]:
    """A plan (tasks.md or a PLAN entry) as lines: each list item with its checkbox state
    (None: no box)."""
    items = []
    for line in text.splitlines():
        if not line.strip() or line.strip().startswith("<"):
            continue
        match = TASK.match(line)
        if match:
            box, label = match.groups()
            items.append({"text": label, "done": None if box is None else box != " "})
        else:
            items.append({"text": line.strip(), "done": None, "heading": line.startswith("#")})
    return items


def _str(data: dict, key: str) -> str:
    value = data.get(key)
    return value.strip() if isinstance(value, str) else ""


def _int(data: dict, key: str) -> int | None:
    value = data.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _value(value) -> str:
    if isinstance(value, str):
        text = value
    elif isinstance(value, float):
        text = f"{value:.6g}"
    elif isinstance(value, (list, tuple)) and all(isinstance(v, (str, int, float)) for v in value):
        text = ", ".join(_value(v) for v in value)
    elif isinstance(value, dict) and all(not isinstance(v, (dict, list)) for v in value.values()):
        text = ", ".join(f"{k} {_value(v)}" for k, v in value.items())
    else:
        text = json.dumps(value, default=str)
    return text if len(text) <= FIELD_CHARS else text[: FIELD_CHARS - 1] + "…"


def _fields(data: dict, skip: set[str]) -> list[tuple[str, str]]:
    return [
        (str(key), _value(value))
        for key, value in data.items()
        if key not in skip and key not in SKIPPED_IN_FIELDS and value not in (None, "", [], {})
    ]


def readable(entry_type: str, data) -> dict:
    """{"kind": "plan" | "step" | "text" | "fields", ...} for the template include
    memory_app/_entry_body.html. A value that is not an object is text."""
    if not isinstance(data, dict):
        return {"kind": "text", "text": _value(data), "fields": []}
    if entry_type == "plan" and (_str(data, "plan") or _str(data, "text")):
        return {
            "kind": "plan",
            "items": plan_items(_str(data, "plan") or _str(data, "text")),
            "fields": [],
        }
    if _str(data, "summary") and _int(data, "iteration") is not None:
        return {
            "kind": "step",
            "iteration": _int(data, "iteration"),
            "promise": _str(data, "promise"),
            "text": _str(data, "summary"),
            "fields": _fields(data, {"summary", "iteration", "promise"}),
        }
    if _str(data, "error") and entry_type == "context":
        return {"kind": "text", "text": _str(data, "error"), "error": True, "fields": []}
    key = next((k for k in TEXT_KEYS if _str(data, k)), "")
    if key:
        return {
            "kind": "text",
            "text": _str(data, key),
            "fields": _fields(data, {key, "title", "goal", "tag", "iteration"}),
        }
    return {"kind": "fields", "fields": _fields(data, set())}


def entry_text(entry_type: str, data, limit: int = 200) -> str:
    """One line of the same words, for a list column (the admin's changelist)."""
    shown = readable(entry_type, data)
    if shown["kind"] == "plan":
        text = "; ".join(item["text"] for item in shown["items"] if not item.get("heading"))
    elif shown["kind"] == "step":
        text = f"iteration {shown['iteration']}: {shown['text']}"
    elif shown["kind"] == "text":
        text = shown["text"]
    else:
        text = "; ".join(f"{k}: {v}" for k, v in shown["fields"])
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
