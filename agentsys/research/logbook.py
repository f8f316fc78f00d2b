"""The sections of `iteration_log.md`: what a person reads to follow a loop after the fact,
one section per iteration and one per reflection."""

from __future__ import annotations

import time

from agentsys.research.state import IterationRecord


def _when(stamp: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(stamp))


def _list(items: list[str], empty: str) -> str:
    return "\n".join(f"  - {item}" for item in items) if items else f"  {empty}"


def iteration_section(record: IterationRecord) -> str:
    return "\n".join(
        [
            f"## Iteration {record.iteration}",
            "",
            f"- started: {_when(record.started_at)}",
            f"- duration: {record.duration_s:.1f} s",
            f"- promise: {record.promise or '(none)'}",
            f"- commit: {record.commit or '(none)'}",
            f"- runs: {', '.join(record.runs) if record.runs else '(none)'}",
            "- files modified:",
            _list(record.files_changed, "(none)"),
            "- errors:",
            _list(record.errors, "(none)"),
            "- tools called:",
            _list([_tool_line(call) for call in record.tool_calls], "(none)"),
            "",
            "### Summary",
            "",
            record.summary or "(no summary)",
        ]
    )


def _tool_line(call: dict) -> str:
    title = f": {call['title']}" if call.get("title") else ""
    return f"{call.get('tool')} ({call.get('status') or '?'}){title}"


def reflection_section(record: IterationRecord, reflection: str, parsed) -> str:
    memories = [f"[{tag}] {text}" for tag, text in parsed.memories]
    return "\n".join(
        [
            f"## Reflection after iteration {record.iteration}",
            "",
            f"- decision: {record.promise}",
            f"- duration: {record.duration_s:.1f} s",
            "- memories:",
            _list(memories, "(none)"),
            "",
            reflection or "(no reflection)",
        ]
    )


def model_error_section(record: IterationRecord) -> str:
    """A failed model call: no iteration of the loop, but a person reading the log later
    learns why the loop waited and what to check."""
    step = "the plan" if record.iteration == 0 else f"iteration {record.iteration}"
    return "\n".join(
        [
            f"## Model call failed ({step})",
            "",
            f"- at: {_when(record.started_at)}",
            f"- {record.summary}",
            "- errors:",
            _list(record.errors, "(none)"),
        ]
    )


def control_section(title: str, *, at: float, iteration: int, text: str = "") -> str:
    """A person's command, where it happened between the iterations: a pause, a resume, a
    steer with its words (so the log read later says why the loop turned)."""
    lines = [f"## {title}", "", f"- at: {_when(at)}", f"- after iteration: {iteration}"]
    if text:
        lines += ["", "\n".join(f"> {line}" for line in text.strip().splitlines())]
    return "\n".join(lines)
