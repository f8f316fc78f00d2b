"""Noticing a loop that is stuck (design doc §3.2): the next prompt then says so plainly, so
the model changes course instead of repeating itself."""

from __future__ import annotations

STREAK_LIMIT = 3  # iterations in a row without changed files or runs
SHORT_SECONDS = 30.0
SHORT_LIMIT = 3  # iterations shorter than SHORT_SECONDS
REPEAT_LIMIT = 2  # the same error in this many latest iterations in a row


def detect_struggle(iterations: list[dict]) -> tuple[int, int, str]:
    """(no_progress_streak, short_iteration_count, warning text or "") over the iteration
    records, oldest first."""
    streak = 0
    for record in reversed(iterations):
        if record.get("files_changed") or record.get("runs"):
            break
        streak += 1
    shorts = sum(1 for r in iterations if float(r.get("duration_s") or 0) < SHORT_SECONDS)
    warnings = []
    if streak >= STREAK_LIMIT:
        warnings.append(
            f"The last {streak} iterations changed no files and ran no experiments. "
            "Do something concrete now: edit the code or launch an experiment, or declare "
            "DONE if the goal is met."
        )
    if shorts >= SHORT_LIMIT:
        warnings.append(
            f"{shorts} iterations took under {SHORT_SECONDS:.0f} s each: you may be answering "
            "without doing the work. Take the time to run and check things."
        )
    repeated = _repeated_error(iterations)
    if repeated:
        warnings.append(
            f"The same error came back {REPEAT_LIMIT} iterations in a row: {repeated!r}. "
            "Try a different approach instead of repeating the same step."
        )
    text = "## Warning: the loop is struggling\n" + "\n".join(f"- {w}" for w in warnings)
    return streak, shorts, text if warnings else ""


def _repeated_error(iterations: list[dict]) -> str:
    latest = iterations[-REPEAT_LIMIT:]
    if len(latest) < REPEAT_LIMIT:
        return ""
    common = set(latest[0].get("errors") or [])
    for record in latest[1:]:
        common &= set(record.get("errors") or [])
    return sorted(common)[0] if common else ""
