"""Writes for agents: commands from people and scripts to the daemon hosting an agent."""

from __future__ import annotations

from django.db import transaction

from agents_app.models import Agent, AgentCommand
from agentsys.types import AgentStatus, CommandKind, SteerUrgency

MAX_STEER_CONTEXT = 20_000


class AgentCommandRefused(Exception):
    """The command cannot apply to this agent (finished, unknown urgency, ...)."""


@transaction.atomic
def request_agent_command(
    *, agent_id: str, kind: CommandKind, payload: dict | None = None, user=None
) -> AgentCommand:
    """Queue a command for runagentd. Refuses, with the reason, what could never apply."""
    agent = Agent.objects.select_for_update().get(pk=agent_id)
    payload = payload or {}
    if agent.is_finished:
        raise AgentCommandRefused(f"{agent_id} is {agent.status}; it no longer takes commands")
    if kind == CommandKind.PAUSE and agent.status == AgentStatus.PAUSED:
        raise AgentCommandRefused(f"{agent_id} is already paused")
    if kind == CommandKind.RESUME and agent.status != AgentStatus.PAUSED:
        raise AgentCommandRefused(f"{agent_id} is {agent.status}, not paused")
    if kind == CommandKind.STEER:
        context = str(payload.get("context", "")).strip()
        if not context:
            raise AgentCommandRefused("a steer needs a non-empty context")
        if len(context) > MAX_STEER_CONTEXT:
            raise AgentCommandRefused(f"steer context is over {MAX_STEER_CONTEXT} characters")
        urgency = payload.get("urgency", SteerUrgency.PRIORITY)
        if urgency not in set(SteerUrgency):
            allowed = ", ".join(SteerUrgency)
            raise AgentCommandRefused(f"urgency must be one of {allowed}, got {urgency!r}")
    return AgentCommand.objects.create(agent=agent, kind=kind, payload=payload, requested_by=user)
