"""The agents page: the live tree L1 (chat session agent) → L2 (research loops) → L3
(executors), each node with its status, goal, iteration and age, and steer / pause / resume /
stop on any node. Actions go through agents_app.services, as the REST API's do; the tree
re-renders its section (htmx) when the agents feed reports a change."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from agents_app import selectors, services
from agents_app.models import Agent
from agentsys.types import (
    TERMINAL_AGENT_STATUSES,
    AgentRole,
    AgentStatus,
    CommandKind,
    SteerUrgency,
)
from events_app.events import AGENTS_STREAM
from events_app.selectors import last_seq

ROOTS_SHOWN = 50
PAGE_FIELDS = (
    "id",
    "parent_id",
    "role",
    "cls_path",
    "status",
    "goal",
    "iteration",
    "run",
    "chat_session_id",
    "superseded_by_id",
    "created_at",
    "finished_at",
    "error",
)
TIERS = [
    (SteerUrgency.MESSAGE, "Message: read at its next step, nothing interrupted"),
    (SteerUrgency.PRIORITY, "Priority: acted on before its next step"),
    (SteerUrgency.CRITICAL, "Critical: stopped and restarted with your context"),
]
COMMANDS = {"pause": CommandKind.PAUSE, "resume": CommandKind.RESUME, "stop": CommandKind.STOP}


ROLE_VALUES = {role.value for role in AgentRole}


def level_of(agent: Agent) -> str:
    """Where the agent sits in the design's three levels, in the words the page uses."""
    words = {1: "L1 session", 2: "L2 research", 3: "L3 run"}
    level = AgentRole(agent.role).level if agent.role in ROLE_VALUES else None
    return words.get(level, str(agent.role))


def _node(agent: Agent, now, *, answering: set[str], titles: dict[str, str]) -> dict:
    live = agent.status not in TERMINAL_AGENT_STATUSES
    node = {
        "agent": agent,
        "level": level_of(agent),
        "live": live,
        "working": live,
        "status": agent.status,
        "goal": agent.goal,
        "age": now - agent.created_at,
    }
    if agent.role == AgentRole.ORCHESTRATOR:
        # Its goal was written with the chat's title of the day: the chat's own title now
        # is the one a person knows. It works only while its chat is answering.
        if agent.chat_session_id in titles:
            node["goal"] = f"Chat: {titles[agent.chat_session_id]}"
        if live and agent.chat_session_id not in answering:
            node["working"], node["status"] = False, AgentStatus.IDLE
    return node


def forest(*, show_ended: bool, keep: frozenset[str] = frozenset()) -> list[dict]:
    """The newest ROOTS_SHOWN trees; without show_ended, only trees with an agent at work
    (a chat whose session agent waits for a person is not at work), and the trees holding an
    agent in `keep`: a tree a person is looking at, or just stopped, stays on the page when it
    ends rather than vanishing under their pointer."""
    agents = list(Agent.objects.only(*PAGE_FIELDS).order_by("created_at", "id"))
    now = timezone.now()
    answering = selectors.chats_answering()
    sessions = {a.chat_session_id for a in agents if a.role == AgentRole.ORCHESTRATOR}
    titles = selectors.chat_titles(session_ids=sessions - {None})
    roots = [a.id for a in reversed(agents) if a.parent_id is None]
    trees = selectors.nest(
        agents, roots, lambda a: _node(a, now, answering=answering, titles=titles)
    )
    if not show_ended:
        trees = [tree for tree in trees if _any_working(tree) or _holds(tree, keep)]
    return trees[:ROOTS_SHOWN]


def _any_working(tree: dict) -> bool:
    return tree["working"] or any(_any_working(child) for child in tree["children"])


def _holds(tree: dict, agent_ids: frozenset[str]) -> bool:
    return tree["agent"].id in agent_ids or any(
        _holds(child, agent_ids) for child in tree["children"]
    )


def _kept(request: HttpRequest) -> frozenset[str]:
    """`?keep=id,id`: the agents whose trees stay shown though ended (unknown ids are no-ops)."""
    ids = request.GET.get("keep", "").split(",")[:ROOTS_SHOWN]
    return frozenset(agent_id for agent_id in ids if agent_id)


def agent_tree(request: HttpRequest) -> HttpResponse:
    show_ended = request.GET.get("ended") == "1"
    # The feed's position first, then the rows: a change committed in between is then both
    # in what is drawn and replayed (harmless), never in neither (a pill stuck on running).
    feed_after = last_seq(stream=AGENTS_STREAM)
    context = {
        "nav": "agents",
        "trees": forest(show_ended=show_ended, keep=_kept(request)),
        "show_ended": show_ended,
        "tiers": TIERS,
    }
    if request.headers.get("HX-Request"):
        return render(request, "agents_app/_forest.html", context)
    context["feed_after"] = feed_after
    return render(request, "agents_app/agents.html", context)


@require_POST
def agent_command(request: HttpRequest, agent_id: str, action: str) -> HttpResponse:
    if action not in COMMANDS and action != "steer":
        raise Http404("No such action")
    agent = Agent.objects.filter(pk=agent_id).first()
    if agent is None:
        raise Http404("No such agent")
    name = selectors.known_name(agent)
    try:
        if action == "steer":
            urgency = request.POST.get("urgency", SteerUrgency.PRIORITY)
            context = request.POST.get("context", "").strip()
            if urgency not in {tier.value for tier in SteerUrgency} or not context:
                raise services.AgentCommandRefused("steer needs a tier and some context")
            services.steer_agent(
                agent_id=agent_id,
                context=context[: services.MAX_STEER_CONTEXT],
                urgency=urgency,
                user=request.user,
            )
            messages.success(request, f"Steered {name} ({urgency}).")
        else:
            services.request_agent_command(
                agent_id=agent_id, kind=COMMANDS[action], user=request.user
            )
            messages.success(request, f"{action.capitalize()} sent to {name}.")
    except Agent.DoesNotExist:
        raise Http404("No such agent") from None
    except services.AgentCommandRefused as refused:
        messages.error(request, f"Not sent to {name}: {refused}")
    # The tree acted on stays shown after it ends (a stopped loop reads "stopped", not gone).
    return redirect(f"/agents/?{urlencode({'keep': agent_id})}#agent-{agent_id}")
