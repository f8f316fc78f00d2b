"""What a person reads in the chat where the session agent was told that something it started
has ended (a synthetic turn): one short line with a link, not the report the agent reads."""

from __future__ import annotations

from django.urls import reverse

from agents_app.models import Agent
from research_app.models import ResearchLoop
from scheduler_app.models import Run

GOAL_CHARS = 120
TOOLS_SHOWN = 12  # of a loop's tool calls, under its line


def _short(goal: str) -> str:
    goal = " ".join(goal.split())
    return goal if len(goal) <= GOAL_CHARS else goal[: GOAL_CHARS - 1] + "…"


def ended_notices(child_ids: set[str]) -> dict[str, dict]:
    """child id → {"text", "href", "link"} for the end of each known child (three queries)."""
    agents = Agent.objects.filter(pk__in=child_ids).only("id", "status", "goal")
    loops = dict(
        ResearchLoop.objects.filter(agent_id__in=child_ids).values_list("agent_id", "state")
    )
    runs = dict(Run.objects.filter(agent_id__in=child_ids).values_list("agent_id", "id"))
    return {
        agent.pk: _notice(agent, agent.pk in loops, runs.get(agent.pk), loops.get(agent.pk))
        for agent in agents
    }


def loop_tool_calls(state) -> list[dict]:
    """The tool calls a loop's model made, step by step (its saved state's history), as the
    chat shows tool parts: the first TOOLS_SHOWN."""
    history = state.get("history") if isinstance(state, dict) else None
    calls = []
    for step in history if isinstance(history, list) else []:
        found = step.get("tool_calls") if isinstance(step, dict) else None
        calls += [c for c in found if isinstance(c, dict)] if isinstance(found, list) else []
    return calls[:TOOLS_SHOWN]


def _notice(agent: Agent, is_loop: bool, run_id: str | None, state=None) -> dict:
    goal = f" “{_short(agent.goal)}”" if agent.goal.strip() else ""
    if is_loop:
        notice = {
            "text": f"The research loop{goal} ended: {agent.status}.",
            "href": reverse("research-loop", args=[agent.pk]),
            "link": "See the loop",
        }
        tools = loop_tool_calls(state)
        return {**notice, "tools": tools} if tools else notice
    return {
        "text": f"The command{goal} ended: {agent.status}.",
        "href": reverse("run", args=[run_id])
        if run_id
        else f"{reverse('agents')}#agent-{agent.pk}",
        "link": "See the run" if run_id else "See it in the agents tree",
    }


def ended_notice(child_id: str) -> dict | None:
    return ended_notices({child_id}).get(child_id)


def notices_for(turns: list) -> dict[str, dict]:
    """turn id → notice, for the synthetic turns among `turns` (ChatTurn rows)."""
    children = {
        turn.pk: (turn.variables or {}).get("child_id")
        for turn in turns
        if turn.synthetic and isinstance((turn.variables or {}).get("child_id"), str)
    }
    found = ended_notices(set(children.values()))
    return {turn_id: found[child] for turn_id, child in children.items() if child in found}
