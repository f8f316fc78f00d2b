"""Where in a loop each of a person's commands happened: the steers, pauses, resumes and
answers of its timeline (research_app.selectors.timeline), each put after the step of its
history that had finished when it came, so that the loop page shows them between its
iterations (a steer read by iteration 3 stands after iteration 2), not only by the clock."""

from __future__ import annotations

from datetime import UTC, datetime

from research_app.models import ResearchLoop

# The loop's own life is said by its status; these are what a person (or the loop, asking
# them) did to it.
NOT_CONTROLS = {"Started", "Done", "Failed", "Stopped"}


def _label(step: dict) -> str:
    phase, n = step.get("phase") or "iteration", step.get("iteration")
    return {
        "plan": "After the plan",
        "reflection": f"After the reflection on iteration {n}",
        "model_error": "After the failed model call",
    }.get(phase, f"After iteration {n}")


def attach(history: list[dict], loop: ResearchLoop, timeline: list[dict]) -> None:
    """Give each step of the page's `history` (selectors.detail's, in the state's order) the
    commands that came after it finished and before the next one did: `controls`, with
    `controls_label`. Those that came before any step finished go with the first."""
    raw = [h for h in loop.state.get("history") or [] if isinstance(h, dict)]
    ends = [_when(h.get("finished_at")) for h in raw[: len(history)]]
    for step in history:
        step["controls"], step["controls_label"] = [], _label(step)
    if not history:
        return
    for item in timeline:
        if item["what"] in NOT_CONTROLS:
            continue
        after = [i for i, end in enumerate(ends) if end is not None and end <= item["at"]]
        history[after[-1] if after else 0]["controls"].append(item)


def _when(stamp) -> datetime | None:
    try:
        return datetime.fromtimestamp(float(stamp), tz=UTC) if stamp else None
    except (TypeError, ValueError, OverflowError):
        return None
