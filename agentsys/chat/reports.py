"""The system message of a synthetic turn: what a finished child did, in
enough detail for the L1 to summarise it for the person."""

from __future__ import annotations

LOG_TAIL_CHARS = 3000
SECTION_CHARS = 6000


def child_report_message(report: dict) -> str:
    kind = report.get("kind", "agent")
    lines = [
        f"The {kind} `{report['id']}` you started has ended: {report['status']}.",
        f"Goal: {report.get('goal', '')}",
    ]
    if report.get("error"):
        lines.append(f"Error: {report['error']}")
    if report.get("exit_code") is not None:
        lines.append(f"Exit code: {report['exit_code']}")
    if report.get("iterations"):
        lines.append(f"Iterations: {report['iterations']}")
    for title, key, limit in (
        ("Reflection", "reflection", SECTION_CHARS),
        ("Iteration log (end)", "iteration_log", SECTION_CHARS),
        ("run.log (end)", "log_tail", LOG_TAIL_CHARS),
    ):
        text = (report.get(key) or "").strip()
        if text:
            lines += ["", f"## {title}", "", text[-limit:]]
    lines += [
        "",
        "Summarise these results for the person in a few sentences: what was tried, what "
        "worked, the best result with its numbers, and what you would do next.",
    ]
    return "\n".join(lines)
