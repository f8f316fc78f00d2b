"""Reads for agents."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from agents_app.models import Agent
from agentsys.types import LIVE_AGENT_STATUSES, LIVE_TURN_STATUSES, AgentRole


def agents_matching(
    *,
    statuses: list[str] | None = None,
    roles: list[str] | None = None,
    parent_id: str | None = None,
    chat_session_id: str | None = None,
    goal_contains: str = "",
) -> QuerySet[Agent]:
    """GET /api/agents: newest first (agent_status_recent_idx serves the status filter)."""
    agents = Agent.objects.select_related("host").order_by("-created_at", "id")
    if statuses:
        agents = agents.filter(status__in=statuses)
    if roles:
        agents = agents.filter(role__in=roles)
    if parent_id:
        agents = agents.filter(parent_id=parent_id)
    if chat_session_id:
        agents = agents.filter(chat_session_id=chat_session_id)
    if goal_contains:
        agents = agents.filter(goal__icontains=goal_contains)
    return agents


def working_agents() -> QuerySet[Agent]:
    """Agents at work: live (idle, running or paused), less the chat session agents that only
    wait for a person. A session agent stays `running` as long as its chat exists; it works
    only while a turn of its chat is queued or streaming. (The chat's turns are reached
    through the foreign key: the chat app sits above this one.)"""
    return (
        Agent.objects.filter(status__in=LIVE_AGENT_STATUSES)
        .filter(
            ~Q(role=AgentRole.ORCHESTRATOR) | Q(chat_session__turns__status__in=LIVE_TURN_STATUSES)
        )
        .distinct()
    )


def chats_answering() -> set[str]:
    """Ids of the agents' chat sessions with a turn queued or streaming."""
    agents = Agent.objects.filter(chat_session__turns__status__in=LIVE_TURN_STATUSES)
    return set(agents.values_list("chat_session_id", flat=True).distinct())


def chat_titles(*, session_ids: set[str]) -> dict[str, str]:
    agents = Agent.objects.filter(chat_session_id__in=session_ids)
    return dict(agents.values_list("chat_session_id", "chat_session__title").distinct())


def known_name(agent: Agent) -> str:
    """The agent as a person knows it, for messages: its chat, its run or its goal, never
    its internal id unless it has nothing else."""
    if agent.role == AgentRole.ORCHESTRATOR and agent.chat_session_id:
        title = chat_titles(session_ids={agent.chat_session_id}).get(agent.chat_session_id)
        if title:
            return f"the chat “{title[:80]}”"
    if agent.role == "executor":
        name = agent.runs.values_list("name", flat=True).first()
        if name:
            return f"the run “{name[:80]}”"
    goal = " ".join(agent.goal.split())
    if not goal:
        return agent.pk
    short = goal if len(goal) <= 80 else goal[:79] + "…"
    kind = "research loop" if agent.role in ("research", "orchestrator") else "agent"
    return f"the {kind} “{short}”"


def agents_in_spawn_order(*, fields: tuple[str, ...]) -> list[Agent]:
    """Every agent, oldest first, for the tree view (nested in Python, cycle-safe)."""
    return list(Agent.objects.only(*fields).order_by("created_at", "id"))


def agent_with_host(*, agent_id: str) -> Agent | None:
    return Agent.objects.select_related("host").filter(pk=agent_id).first()


def agent_exists(*, agent_id: str) -> bool:
    return Agent.objects.filter(pk=agent_id).exists()


def child_ids(*, agent_id: str) -> list[str]:
    return list(
        Agent.objects.filter(parent_id=agent_id)
        .order_by("created_at", "id")
        .values_list("id", flat=True)
    )


def nest(agents: list[Agent], root_ids: list[str], node) -> list[dict]:
    """Nest `agents` (in spawn order) under `root_ids`, each made a dict by `node(agent)` plus
    "children". Walks down from the roots placing each agent once, so a parent cycle made by
    hand (admin) cannot recurse forever."""
    nodes = {agent.id: {**node(agent), "children": []} for agent in agents}
    children_of: dict[str, list[Agent]] = {}
    for agent in agents:  # in spawn order
        if agent.parent_id:
            children_of.setdefault(agent.parent_id, []).append(agent)
    placed = set(root_ids)
    pending = list(root_ids)
    while pending:
        parent_id = pending.pop()
        for child in children_of.get(parent_id, []):
            if child.id not in placed:
                placed.add(child.id)
                nodes[parent_id]["children"].append(nodes[child.id])
                pending.append(child.id)
    return [nodes[root_id] for root_id in root_ids]
