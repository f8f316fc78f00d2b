"""Noticing a loop that is stuck: the next prompt then says so plainly, so
the model changes course instead of repeating itself.

All three signals look at the LATEST iterations only, so a loop that recovered stops being
warned about it:
- no progress: the trailing run of iterations that changed no file and launched no run (≥ 3);
- short iterations: the trailing run of iterations under 30 s (≥ 3) — answering without doing
  the work;
- a repeated error: one error text present in each of the last 2 iterations (2, not 3: an
  identical failure twice in a row already says the same step is being retried unchanged).
"""

from __future__ import annotations

import math

STREAK_LIMIT = 3  # iterations in a row without changed files or runs
SHORT_SECONDS = 30.0
SHORT_LIMIT = 3  # iterations in a row shorter than SHORT_SECONDS
REPEAT_LIMIT = 2  # the same error in this many latest iterations in a row


def detect_struggle(iterations: list[dict]) -> tuple[int, int, str]:
    """(no_progress_streak, short_iteration_count, warning text or "") over the iteration
    records, oldest first. Records missing a key count as having none of it."""
    records = [r for r in iterations if isinstance(r, dict)]
    streak = _trailing(records, lambda r: not (r.get("files_changed") or r.get("runs")))
    shorts = _trailing(records, lambda r: _seconds(r.get("duration_s")) < SHORT_SECONDS)
    warnings = []
    if streak >= STREAK_LIMIT:
        warnings.append(
            f"The last {streak} iterations changed no files and ran no experiments. "
            "Do something concrete now: edit the code or launch an experiment, or declare "
            "DONE if the goal is met."
        )
    if shorts >= SHORT_LIMIT:
        warnings.append(
            f"The last {shorts} iterations took under {SHORT_SECONDS:.0f} s each: you may be "
            "answering without doing the work. Take the time to run and check things."
        )
    repeated = _repeated_error(records)
    if repeated:
        warnings.append(
            f"The same error came back {REPEAT_LIMIT} iterations in a row: {repeated[:300]!r}. "
            "Try a different approach instead of repeating the same step."
        )
    text = "## Warning: the loop is struggling\n" + "\n".join(f"- {w}" for w in warnings)
    return streak, shorts, text if warnings else ""


def _trailing(records: list[dict], test) -> int:
    count = 0
    for record in reversed(records):
        if not test(record):
            break
        count += 1
    return count


def _seconds(value) -> float:
    """A duration; an unreadable one counts as long (no false 'too short' warning)."""
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return math.inf
    return seconds if math.isfinite(seconds) else math.inf


def _repeated_error(records: list[dict]) -> str:
    latest = records[-REPEAT_LIMIT:]
    if len(latest) < REPEAT_LIMIT:
        return ""
    sets = [{str(e) for e in _errors(r) if str(e).strip()} for r in latest]
    common = set.intersection(*sets)
    return sorted(common)[0] if common else ""


def _errors(record: dict) -> list:
    errors = record.get("errors") or []
    return [errors] if isinstance(errors, str) else list(errors)
