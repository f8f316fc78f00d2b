"""What a chat's action card says of an l1_action result: what the session agent did, in
words ("Started a research loop"), not its tag's name, linked to what it started. The page
renders these (sessions_app/_action.html) and static/js/chat.js reads the same table for the
cards that come in live, so a card reads the same either way."""

from __future__ import annotations

from django.urls import reverse

from research_app.progress import loop_progress

# {action: (what was done, what could not be)}: the actions of agentsys.chat.actions.
ACTION_WORDS = {
    "spawn_research": ("Started a research loop", "Could not start a research loop"),
    "spawn_command": ("Started a run", "Could not start the run"),
    "steer_child": ("Steered an experiment", "Could not steer the experiment"),
    "stop_child": ("Stopped an experiment", "Could not stop the experiment"),
}


def action_title(action: dict) -> str:
    """What was done; a tag the agent does not know (`<start_research>`) is named as such."""
    name = str(action.get("action") or "")
    done, refused = ACTION_WORDS.get(name, (f"Unknown action tag <{name}>",) * 2)
    return refused if action.get("error") else done


def action_href(action: dict) -> str:
    """A loop's own page; any other agent in the agents tree."""
    agent_id = str(action.get("agent_id") or "")
    if not agent_id or action.get("error"):
        return ""
    if action.get("action") == "spawn_research":
        return reverse("research-loop", args=[agent_id])
    return f"{reverse('agents')}#agent-{agent_id}"


def cards(actions: list) -> list[dict]:
    """The turn's stored results, each with its title, link and (a loop's) progress."""
    shown = []
    for action in actions:
        if not isinstance(action, dict):
            continue
        card = {**action, "title": action_title(action), "href": action_href(action)}
        if card["href"] and action.get("action") == "spawn_research":
            card["progress"] = loop_progress(str(action["agent_id"]))
        shown.append(card)
    return shown
