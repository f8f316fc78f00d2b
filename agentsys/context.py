"""Rendering memory entries into prompt text: sections of one line per
entry, cut to a token budget. Pure functions: the same entries give the same text."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from agentsys.memory import Entry

CHARS_PER_TOKEN = 4
TRUNCATED = "\n... [truncated]"


def entry_line(entry: Entry) -> str:
    """`[{type}] {agent_id}[ -> target][ [tags]]: {data}`"""
    target = f" -> {entry.target_id}" if entry.target_id else ""
    tags = f" [{', '.join(entry.tags)}]" if entry.tags else ""
    data = json.dumps(entry.data, sort_keys=True, ensure_ascii=False, default=str)
    return f"[{entry.type}] {entry.agent_id or '-'}{target}{tags}: {data}"


def render_sections(sections: Sequence[tuple[str, Iterable[Entry]]], token_budget: int) -> str:
    """Non-empty sections as `## Title` and their lines; over budget (about 4 characters
    a token) the text is cut and ends with `... [truncated]`."""
    blocks = []
    for title, entries in sections:
        lines = [entry_line(e) for e in entries]
        if lines:
            blocks.append("\n".join([f"## {title}", *lines]))
    return cut_to_budget("\n\n".join(blocks), token_budget)


def cut_to_budget(text: str, token_budget: int) -> str:
    limit = max(0, token_budget) * CHARS_PER_TOKEN
    if len(text) <= limit:
        return text
    return text[:limit] + TRUNCATED


def memory_bank_lines(entries: Iterable[Entry]) -> str:
    """The `{{memories}}` block of the L1 and L2 prompts: `- [tags] text`, one a memory."""
    lines = []
    for entry in entries:
        text = memory_text(entry.data)
        tags = f"[{', '.join(entry.tags)}] " if entry.tags else ""
        lines.append(f"- {tags}{text}")
    return "\n".join(lines)


def memory_text(data: dict) -> str:
    """A memory's words: its `text` (with `title` before it), else its data as JSON."""
    text = data.get("text") if isinstance(data.get("text"), str) else None
    if text is None:
        return json.dumps(data, sort_keys=True, ensure_ascii=False, default=str)
    title = data.get("title")
    return f"{title}: {text}" if isinstance(title, str) and title else text
