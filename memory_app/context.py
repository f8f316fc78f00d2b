"""Context assembly: an agent's prompt context, widened from its own
entries to its sweep, session and project, cut to a token budget."""

from __future__ import annotations

from agentsys.context import CHARS_PER_TOKEN, render_sections
from agentsys.memory import ContextLimits, Entry
from memory_app import selectors

MIN_LINE_CHARS = 12  # "[plan] x: {}" and its newline: no line is shorter


def assemble_context(
    *, agent_id: str, scope: dict, token_budget: int, limits: ContextLimits | None = None
) -> str:
    """ "## My Entries" (own, oldest first), "## Inbox" (unread messages), then by scope: a
    run-level agent gets "## Sweep Context" (its sweep's other agents) and "## Session
    Context"; a sweep-level agent "## Session Context"; every agent "## Project Context".
    Each level holds the newest CONTEXT, REFLECTION and ALERT entries of others, up to its
    limit, none shown twice. Only active entries; the same rows give the same text."""
    limits = limits or ContextLimits()
    # Own entries come first and the text is cut at the budget: no more can ever show.
    fitting = max(token_budget, 0) * CHARS_PER_TOKEN // MIN_LINE_CHARS + 1
    own = selectors.own_entries(agent_id=agent_id, limit=min(limits.own, fitting))
    unread = selectors.inbox(agent_id=agent_id, limit=limits.inbox)
    shown: set[str] = set()  # by a narrower level (own entries are left out by the query)
    sections: list[tuple[str, list[Entry]]] = [
        ("My Entries", own),
        ("Inbox", unread),
    ]
    for title, field, limit in widening_levels(scope, limits):
        rows = selectors.level_entries(
            field=field,
            value=scope[field],
            types=tuple(limits.level_types),
            other_than=agent_id,
            limit=limit + len(shown),
        )
        fresh = [e for e in rows if e.key not in shown][:limit]
        shown.update(e.key for e in fresh)
        sections.append((title, fresh))
    return render_sections(sections, token_budget)


def widening_levels(scope: dict, limits: ContextLimits) -> list[tuple[str, str, int]]:
    levels = []
    if scope.get("run"):
        if scope.get("sweep"):
            levels.append(("Sweep Context", "sweep", limits.sweep))
        if scope.get("session"):
            levels.append(("Session Context", "session", limits.session))
    elif scope.get("sweep") and scope.get("session"):
        levels.append(("Session Context", "session", limits.session))
    levels.append(("Project Context", "project", limits.project))
    return levels
