"""What `manage.py research start --follow` (`make demo`) prints for each step of a loop: the
plan as its list, each iteration's promise and summary, the reflection whole. Indented
paragraphs a person reads in a terminal, never a cut sentence or `[plan 0] -:`."""

from __future__ import annotations

import re
import textwrap

from common.status_words import promise_word

WIDTH = 100
INDENT = "    "
# A reflection's verdict, where it reads on after "[reflection]".
VERDICTS = {"REFLECT_STOP": "the loop stops", "REFLECT_CONTINUE": "the loop goes on"}
_BULLET = re.compile(r"^(?:\d+[.)]|[-*•])\s+")


def _block(text: str) -> str:
    """Each line of `text` indented, long ones wrapped; blank lines kept as paragraph breaks."""
    lines = []
    for line in (text or "").strip().splitlines():
        if not line.strip():
            lines.append("")
            continue
        lead = line[: len(line) - len(line.lstrip())]
        bullet = _BULLET.match(line.strip())  # a list item's wrapped lines hang under its text
        hang = " " * len(bullet.group(0)) if bullet else ""
        lines.extend(
            textwrap.wrap(
                line.strip(),
                WIDTH,
                initial_indent=INDENT + lead,
                subsequent_indent=INDENT + lead + hang,
                break_on_hyphens=False,
            )
        )
    return "\n".join(lines)


def step_lines(step: dict, *, plan: str = "", reflection: str = "") -> str:
    """One history step. `plan` and `reflection` are the loop's whole texts: the history keeps
    a reflection's first 300 characters only, and the plan not at all."""
    phase = step.get("phase") or "iteration"
    summary = (step.get("summary") or "").strip()
    if phase == "plan":
        head = "[plan]" + (f" {summary}" if summary and summary not in plan else "")
        body = _block(plan or summary)
    elif phase == "reflection":
        verdict = VERDICTS.get(step.get("promise") or "", "")
        head = "[reflection]" + (f" {verdict}:" if verdict else "")
        whole = reflection if reflection and reflection.startswith(summary[:200]) else summary
        body = _block(whole)
    elif phase == "model_error":
        head = f"[model call failed] {summary}"
        body = ""
    else:
        promise = promise_word(step.get("promise")) if step.get("promise") else "no promise"
        head = f"[iteration {step.get('iteration')}] {promise}"
        body = _block(summary)
    runs = ", ".join(f"{r['name'] or r['id'] or r['agent_id']} {r['status']}" for r in step["runs"])
    tail = (f"\n{INDENT}runs: {runs}" if runs else "") + "".join(
        f"\n{INDENT}error: {e}" for e in step.get("errors") or []
    )
    return head + (f"\n{body}" if body else "") + tail
