"""The L1 prompt: the mode's skill rendered with the session's context,
then the person's message. The store gathers the facts; this module only words them."""

from __future__ import annotations

from agentsys.skills import PromptSkills

SKILL_FOR_MODE = {
    "wild": "l1_wild_session",
    "auto": "l1_auto_session",
    "agent": "l1_agent_session",
}
HISTORY_MESSAGE_CHARS = 2000


def children_status(children: list[dict]) -> str:
    """Active children first, then the 5 that finished last."""
    if not children:
        return "No experiments yet."
    lines = []
    for child in children:
        iteration = f", iteration {child['iteration']}" if child.get("iteration") else ""
        lines.append(
            f"- `{child['id']}` ({child.get('kind', child.get('role', 'agent'))}, "
            f"{child['status']}{iteration}): {_one_line(child.get('goal', ''), 200)}"
        )
    return "\n".join(lines)


def memories(entries: list[str]) -> str:
    if not entries:
        return "No reflections stored yet."
    return "\n".join(f"- {_one_line(text, 500)}" for text in entries)


def experiment_context(facts: dict) -> str:
    if not facts:
        return ""
    lines = [
        f"Runs: {facts.get('running', 0)} running, {facts.get('queued', 0)} queued, "
        f"{facts.get('done', 0)} done, {facts.get('failed', 0)} failed."
    ]
    for failure in facts.get("recent_failures", []):
        lines.append(
            f"- failed: `{failure['id']}` {failure['name']}: {_one_line(failure['error'], 200)}"
        )
    for alert in facts.get("open_alerts", []):
        lines.append(f"- open alert ({alert['severity']}): {_one_line(alert['message'], 200)}")
    return "\n".join(lines)


def conversation_history(messages: list[dict]) -> str:
    if not messages:
        return "(this is the start of the conversation)"
    lines = []
    for message in messages:
        content = message["content"]
        if len(content) > HISTORY_MESSAGE_CHARS:
            content = content[:HISTORY_MESSAGE_CHARS] + " [...]"
        lines.append(f"[{message['role'].upper()}] {content}")
    return "\n\n".join(lines)


def variables_for(raw: dict, *, workdir: str, mode: str, system_prompt: str) -> dict:
    return {
        "workdir": workdir,
        "mode": mode,
        "children_status": children_status(raw.get("children", [])),
        "memories": memories(raw.get("memories", [])),
        "experiment_context": experiment_context(raw.get("experiment_context", {})),
        "conversation_history": conversation_history(raw.get("history", [])),
        "system_prompt": system_prompt,
    }


def build_prompt(
    skills: PromptSkills, mode: str, variables: dict, message: str, *, synthetic: bool
) -> tuple[str, str]:
    """(skill id, prompt). A synthetic turn's message is the system's report, not a person's."""
    skill_id = SKILL_FOR_MODE[mode]
    speaker = "[SYSTEM]" if synthetic else "[USER]"
    return skill_id, f"{skills.render(skill_id, variables).rstrip()}\n\n{speaker} {message}"


def _one_line(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
