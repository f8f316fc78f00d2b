"""Writes for research loops: starting one (its sweep, agent and row in one transaction) and
saving the state its agent reports after every step."""

from __future__ import annotations

import logging
from pathlib import Path

from django.conf import settings
from django.db import transaction

from accounts_app.selectors import default_budget
from agents_app.models import Agent
from agents_app.services import create_agent
from agentsys.listen import AGENTS_CHANNEL
from agentsys.metric_sources.stdout import compile_pattern
from agentsys.registry import RESEARCH_AGENT
from agentsys.research.budget import tightest
from agentsys.research.settings import DEFAULT_STOP_WHEN
from agentsys.types import AgentRole
from common.json_safe import json_safe
from research_app.models import ResearchLoop
from research_app.questions import settle_alerts
from scheduler_app.models import Sweep, SweepKind, SweepStatus

logger = logging.getLogger("research_app")

AUTONOMY_LEVELS = ("cautious", "balanced", "full")
MAX_GOAL = 5000
STATE_TEXT_LIMIT = 200_000  # plan / reflection kept in their columns


class ResearchRefused(ValueError):
    """The loop cannot start as asked (the message says which field and why)."""


def _checked(goal, max_iterations, wait_seconds, autonomy_level, workdir) -> tuple[str, str]:
    goal = (goal or "").strip()
    if not 1 <= len(goal) <= MAX_GOAL:
        raise ResearchRefused(f"goal: must be 1 to {MAX_GOAL} characters")
    if not 1 <= max_iterations <= 1000:
        raise ResearchRefused("max_iterations: must be between 1 and 1000")
    if not 0 <= wait_seconds <= 86400:
        raise ResearchRefused("wait_seconds: must be between 0 and 86400")
    if autonomy_level not in AUTONOMY_LEVELS:
        raise ResearchRefused(f"autonomy_level: must be one of {', '.join(AUTONOMY_LEVELS)}")
    workdir = workdir or str(settings.AGENTSYS_WORKDIR)
    if not Path(workdir).is_absolute() or not Path(workdir).is_dir():
        raise ResearchRefused(f"workdir: {workdir!r} is not an existing absolute directory")
    return goal, workdir


@transaction.atomic
def _checked_pattern(pattern: str) -> str:
    try:
        compile_pattern(pattern)
    except ValueError as error:
        raise ResearchRefused(str(error)) from None
    return pattern


def start_research(
    *,
    goal: str,
    max_iterations: int = 25,
    wait_seconds: float = 30,
    autonomy_level: str = "balanced",
    max_experiments_per_iteration: int = 8,
    workdir: str | None = None,
    chat_session_id: str | None = None,
    extra_config: dict | None = None,
    parent_id: str | None = None,
    metrics_pattern: str | None = None,
    backend: str | None = None,
    slurm: dict | None = None,
    env: dict | None = None,
    venv: str | None = None,
    include_uncommitted: bool = False,
    commit_allow: list[str] | None = None,
    budget: dict | None = None,
    approval_gpus: int = 4,
    approval_timeout_s: float = 86400,
    stop_when: list | None = None,
    wake_on: str = "each",
    wake_when: list | None = None,
    started_by=None,
) -> ResearchLoop:
    """A new research loop: a sweep for its runs, the research agent (claimed by a runagentd
    at once) and its row. Raises ResearchRefused saying what is wrong.

    `started_by` (a loop started from a chat: the chat's owner) is recorded on its sweep as
    the person its API token acts for (scheduler_app.loop_scope.owner_of_loop). Its budget
    is the tightest of `budget`, its chat's default and that person's (`_budget_of`)."""
    from django.db import connection

    goal, workdir = _checked(goal, max_iterations, wait_seconds, autonomy_level, workdir)
    # The chat model through the foreign key: the chat app sits above this one.
    chat_sessions = ResearchLoop._meta.get_field("chat_session").related_model.objects
    chat = chat_sessions.filter(pk=chat_session_id).first() if chat_session_id else None
    if chat_session_id is not None and chat is None:
        raise ResearchRefused(f"chat_session_id: no chat session {chat_session_id!r}")
    if started_by is None and chat is not None:
        started_by = chat.owner
    agentsys = settings.AGENTSYS
    # The model and the OpenCode server are the host's (runagentd's environment): each host
    # may reach its own. The agent reports what it used in its state's settings.
    loop_settings = {
        "workdir": workdir,
        "max_iterations": max_iterations,
        "wait_seconds": wait_seconds,
        "autonomy_level": autonomy_level,
        "max_experiments_per_iteration": max_experiments_per_iteration,
    }
    if metrics_pattern:
        loop_settings["metrics_pattern"] = _checked_pattern(metrics_pattern)
    if backend:  # its experiments' (ResearchIn checked both)
        loop_settings["backend"] = backend
    if slurm:
        loop_settings["slurm"] = slurm
    if env:  # its experiments', as its sweep's runs' (ResearchIn checked both)
        loop_settings["env"] = env
    if venv:
        loop_settings["venv"] = venv
    if include_uncommitted:
        loop_settings["include_uncommitted"] = True
    if commit_allow:
        loop_settings["commit_allow"] = list(commit_allow)
    if approval_gpus != 4 or approval_timeout_s != 86400:
        loop_settings["approval_gpus"] = approval_gpus
        loop_settings["approval_timeout_s"] = approval_timeout_s
    if stop_when is not None:  # unset: the loop's default rule (a NaN loss stops a run)
        loop_settings["stop_when"] = stop_when
    if wake_on != "each":
        loop_settings["wake_on"] = wake_on
    if wake_when:
        loop_settings["wake_when"] = list(wake_when)
    loop_settings.update(_budget_of(budget, chat, started_by))
    sweep = Sweep.objects.create(
        kind=SweepKind.RESEARCH,
        metrics_pattern=metrics_pattern or "",
        run_backend=backend or "",
        slurm_options=slurm or {},
        run_env=env or {},
        run_venv=venv or "",
        # What the runs the model makes itself (MCP create_run) inherit, as its experiments.
        stop_when=list(DEFAULT_STOP_WHEN) if stop_when is None else stop_when,
        name=f"Research: {goal[:180]}",
        goal=goal,
        status=SweepStatus.RUNNING,
        chat_session_id=chat_session_id,
        created_by=started_by if getattr(started_by, "is_authenticated", False) else None,
    )
    agent = create_agent(
        role=AgentRole.RESEARCH,
        cls_path=RESEARCH_AGENT,
        parent_id=parent_id,  # the chat's L1 agent, told when the loop ends
        goal=goal,
        config={
            **loop_settings,
            "chat_session_id": chat_session_id,
            **(extra_config or {}),
        },
        project=agentsys.project,
        session=chat_session_id or "",
        sweep=sweep.id,
        chat_session_id=chat_session_id,
    )
    loop = ResearchLoop.objects.create(
        agent=agent,
        sweep=sweep,
        chat_session_id=chat_session_id,
        goal=goal,
        settings=loop_settings,
    )
    with connection.cursor() as cursor:  # a runagentd claims it at commit
        cursor.execute("SELECT pg_notify(%s, %s)", [AGENTS_CHANNEL, agent.id])
    return loop


def _budget_of(budget: dict | None, chat, person) -> dict:
    """{"budget", "budget_from"} of a new loop (nothing when no one set one): per cap the
    tightest of its own, its chat session's default and its person's default."""
    try:
        merged, came_from = tightest(
            {
                "loop": budget,
                "session": chat.default_budget if chat is not None else None,
                "person": default_budget(person),
            }
        )
    except (TypeError, ValueError) as error:
        raise ResearchRefused(str(error)) from None
    return {"budget": merged, "budget_from": came_from} if merged else {}


def save_state(agent_id: str, state: dict) -> dict:
    """Store the state a research agent reported; returns the small summary the event feed
    carries. A malformed field is left as it was, never a crash of the daemon."""
    if not isinstance(state, dict):
        logger.warning("%s: research state is not an object; ignored", agent_id)
        return {}
    agent = Agent.objects.filter(pk=agent_id).first()
    if agent is None:
        return {}
    loop = ResearchLoop.objects.filter(agent_id=agent_id).first()
    if loop is None:  # a CRITICAL steer respawned the agent under a new id
        loop = _respawned_loop(agent, state)
    loop.state = json_safe(state)  # a run's NaN loss in its results: PostgreSQL has no NaN
    iteration = state.get("iteration")
    if isinstance(iteration, int) and not isinstance(iteration, bool) and iteration >= 0:
        loop.iteration = iteration
        Agent.objects.filter(pk=agent_id).update(iteration=iteration)
    for name in ("plan", "reflection"):
        if isinstance(state.get(name), str):
            setattr(loop, name, state[name][:STATE_TEXT_LIMIT])
    if isinstance(state.get("opencode_session_id"), str):
        loop.opencode_session_id = state["opencode_session_id"][:100]
    loop.save()
    _end_sweep(loop, state.get("status"))
    settle_alerts(agent_id, state)
    return {
        "iteration": loop.iteration,
        "status": state.get("status") if isinstance(state.get("status"), str) else "",
        "phase": state.get("phase") if isinstance(state.get("phase"), str) else "",
    }


def _respawned_loop(agent: Agent, state: dict) -> ResearchLoop:
    """The row of a loop a CRITICAL steer respawned under a new id, in its predecessor's
    sweep: its settings from its state, and where its caps came from (`budget_from`, which
    only the row that started it knew) from the predecessor's."""
    settings = dict(state["settings"]) if isinstance(state.get("settings"), dict) else {}
    sweep = Sweep.objects.filter(pk=agent.sweep).first()
    before = ResearchLoop.objects.filter(sweep=sweep).first() if sweep else None
    if before is not None and "budget_from" in before.settings:
        settings.setdefault("budget_from", before.settings["budget_from"])
    return ResearchLoop(
        agent=agent,
        sweep=sweep,
        chat_session_id=agent.chat_session_id,
        goal=agent.goal,
        settings=settings,
    )


def _end_sweep(loop: ResearchLoop, status) -> None:
    """The sweep says what its loop does; a loop respawned by a CRITICAL steer (the old one
    stopped, the new one running in the same sweep) sets it running again."""
    statuses = {
        "running": SweepStatus.RUNNING,
        "done": SweepStatus.DONE,
        "failed": SweepStatus.FAILED,
        "stopped": SweepStatus.STOPPED,
    }
    if loop.sweep_id and status in statuses:
        Sweep.objects.filter(pk=loop.sweep_id).update(status=statuses[status])
