"""REST for agents: list, tree, detail, memory entries, and the commands a person or a script
sends them (steer, pause, resume, stop). The live event stream is events_app.sse.

Commands are answered 202: the web process holds no agent state (runagentd does),
so a command is queued for the daemon hosting the agent, which carries it out and records
what happened in the event log.
"""

from __future__ import annotations

from ninja import Query, Router, Status

from agents_app import selectors, services
from agents_app.models import Agent, AgentCommand
from agents_app.schemas import (
    AgentDetailOut,
    AgentNode,
    AgentOut,
    AgentStartIn,
    CommandOut,
    ErrorOut,
    SteerIn,
    SteerOut,
)
from agentsys.registry import DisallowedAgentClass
from agentsys.types import AgentRole, AgentStatus, CommandKind, EntryType
from common.api_contract import MAX_OFFSET
from events_app import selectors as event_selectors
from memory_app import selectors as memory_selectors
from memory_app.schemas import MemoryEntryOut

router = Router()

AGENT_EVENTS_IN_DETAIL = 50
MAX_PAGE = 500
ID_LENGTH = 64
# What a tree node shows; config and result stay out of a query over every agent.
TREE_FIELDS = (
    "id",
    "parent_id",
    "role",
    "status",
    "goal",
    "iteration",
    "superseded_by_id",
    "created_at",
)


def _caller(request):
    # The API token stands for the operator (request.auth == "token"), a session for its user.
    return None if request.auth == "token" else request.user


def _no_agent(agent_id: str) -> Status:
    return Status(404, {"detail": f"No agent {agent_id!r}"})


def _one_of(name: str, raw: str | None, allowed: type) -> list[str]:
    """The comma-separated values of a filter, each checked against an enum; blank = none.
    Raises ValueError naming the allowed values."""
    values = [value.strip() for value in (raw or "").split(",") if value.strip()]
    choices = [member.value for member in allowed]
    for value in values:
        if value not in choices:
            raise ValueError(f"{name} must be one of {', '.join(choices)}; got {value[:40]!r}")
    return values


# -- reads ------------------------------------------------------------------------------------


@router.get(
    "",
    response={200: list[AgentOut], 400: ErrorOut},
    summary="Agents, newest first; filter by status (comma-separated), role, parent, chat, goal",
)
def list_agents(
    request,
    status: str | None = Query(None, max_length=200),
    role: str | None = Query(None, max_length=200),
    parent_id: str | None = Query(None, max_length=ID_LENGTH),
    chat_session_id: str | None = Query(None, max_length=ID_LENGTH),
    q: str | None = Query(None, max_length=200, description="Text in the goal"),
    limit: int = Query(50, ge=1, le=MAX_PAGE),
    offset: int = Query(0, ge=0, le=MAX_OFFSET),
):
    try:
        statuses = _one_of("status", status, AgentStatus)
        roles = _one_of("role", role, AgentRole)
    except ValueError as error:
        return Status(400, {"detail": str(error)})
    agents = selectors.agents_matching(
        statuses=statuses,
        roles=roles,
        parent_id=parent_id,
        chat_session_id=chat_session_id,
        goal_contains=(q or "").strip(),
    )
    return list(agents[offset : offset + limit])


@router.get(
    "/tree",
    response={200: list[AgentNode], 404: ErrorOut},
    summary="Agents as a tree: roots (no parent) newest first, children in spawn order",
)
def agent_tree(request, root_id: str | None = Query(None, max_length=ID_LENGTH)):
    # One query, nested here: no recursive SQL, so a parent cycle made by hand (admin) cannot
    # make the database recurse forever.
    agents = selectors.agents_in_spawn_order(fields=TREE_FIELDS)
    if root_id:
        if not any(agent.id == root_id for agent in agents):
            return _no_agent(root_id)
        return _assemble_tree(agents, [root_id])
    roots = [agent.id for agent in reversed(agents) if agent.parent_id is None]
    return _assemble_tree(agents, roots)


def _assemble_tree(agents: list[Agent], root_ids: list[str]) -> list[dict]:
    return selectors.nest(agents, root_ids, _tree_node)


def _tree_node(agent: Agent) -> dict:
    return {
        "id": agent.id,
        "role": agent.role,
        "status": agent.status,
        "goal": agent.goal,
        "iteration": agent.iteration,
        "superseded_by_id": agent.superseded_by_id,
        "created_at": agent.created_at,
    }


@router.get(
    "/{agent_id}",
    response={200: AgentDetailOut, 404: ErrorOut},
    summary="One agent, its children and its last 50 events",
)
def get_agent(request, agent_id: str):
    agent = selectors.agent_with_host(agent_id=agent_id)
    if agent is None:
        return _no_agent(agent_id)
    agent.child_ids = selectors.child_ids(agent_id=agent.id)
    agent.recent_events = [
        event.as_message()
        for event in event_selectors.recent_events(agent_id=agent.id, limit=AGENT_EVENTS_IN_DETAIL)
    ]
    return agent


@router.get(
    "/{agent_id}/entries",
    response={200: list[MemoryEntryOut], 400: ErrorOut, 404: ErrorOut},
    summary="Memory entries the agent wrote, newest first (inbox=true: messages to it)",
)
def agent_entries(
    request,
    agent_id: str,
    entry_type: str | None = Query(None, alias="type", max_length=200),
    inbox: bool = False,
    limit: int = Query(50, ge=1, le=MAX_PAGE),
):
    try:
        types = _one_of("type", entry_type, EntryType)
    except ValueError as error:
        return Status(400, {"detail": str(error)})
    if not selectors.agent_exists(agent_id=agent_id):
        return _no_agent(agent_id)
    return memory_selectors.entries_of_agent(
        agent_id=agent_id, inbox=inbox, types=types, limit=limit
    )


# -- commands ---------------------------------------------------------------------------------


@router.post(
    "/{agent_id}/steer",
    response={202: SteerOut, 404: ErrorOut, 409: ErrorOut},
    summary="Steer: critical (stop and respawn), priority (next step), message (inbox)",
)
def steer_agent(request, agent_id: str, payload: SteerIn):
    try:
        result = services.steer_agent(
            agent_id=agent_id,
            context=payload.context,
            urgency=payload.urgency,
            user=_caller(request),
        )
    except Agent.DoesNotExist:
        return _no_agent(agent_id)
    except services.AgentCommandRefused as refused:
        return Status(409, {"detail": str(refused)})
    if isinstance(result, AgentCommand):
        out = SteerOut(
            agent_id=agent_id, urgency=payload.urgency, status="queued", command_id=result.pk
        )
    else:
        out = SteerOut(
            agent_id=agent_id,
            urgency=payload.urgency,
            status="delivered_to_inbox",
            entry_key=result.key,
        )
    return Status(202, out)


@router.post(
    "",
    response={201: AgentOut, 422: ErrorOut},
    summary="Start a top-level agent of an allow-listed class (a runagentd picks it up)",
)
def start_agent(request, payload: AgentStartIn):
    from django.conf import settings

    try:
        agent = services.request_agent_start(
            cls_path=payload.cls_path,
            goal=payload.goal,
            config=payload.config,
            project=payload.project or settings.AGENTSYS.project,
            session=payload.session,
        )
    except (DisallowedAgentClass, ImportError, AttributeError) as error:
        return Status(422, {"detail": f"cls_path: {error}"})
    except services.AgentStartRefused as error:
        return Status(422, {"detail": str(error)})
    return Status(201, selectors.agent_with_host(agent_id=agent.id))


def _command(request, agent_id: str, kind: CommandKind):
    try:
        command = services.request_agent_command(
            agent_id=agent_id, kind=kind, user=_caller(request)
        )
    except Agent.DoesNotExist:
        return _no_agent(agent_id)
    except services.AgentCommandRefused as refused:
        return Status(409, {"detail": str(refused)})
    return Status(202, CommandOut(command_id=command.pk, agent_id=agent_id, kind=kind))


COMMAND_RESPONSES = {202: CommandOut, 404: ErrorOut, 409: ErrorOut}


@router.post("/{agent_id}/pause", response=COMMAND_RESPONSES, summary="Pause (and its subtree)")
def pause_agent(request, agent_id: str):
    return _command(request, agent_id, CommandKind.PAUSE)


@router.post(
    "/{agent_id}/resume",
    response=COMMAND_RESPONSES,
    summary="Resume a paused agent (and its subtree)",
)
def resume_agent(request, agent_id: str):
    return _command(request, agent_id, CommandKind.RESUME)


@router.post("/{agent_id}/stop", response=COMMAND_RESPONSES, summary="Stop (and its subtree)")
def stop_agent(request, agent_id: str):
    return _command(request, agent_id, CommandKind.STOP)
