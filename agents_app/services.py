"""Writes for agents: commands from people and scripts to the daemon hosting an agent.

The web process holds no agent state (runagentd does): stop, pause, resume and
steer become AgentCommand rows, and a NOTIFY on `agentsys_commands` (sent at commit) wakes the
daemon that hosts the agent. A MESSAGE steer needs no daemon: it is a memory entry in the
target's inbox, read at its next context assembly.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Protocol

from django.db import connection, transaction

from agents_app.models import Agent, AgentCommand, CommandStatus
from agentsys.listen import AGENTS_CHANNEL, COMMANDS_CHANNEL
from agentsys.registry import AgentClassRegistry
from agentsys.types import (
    AgentRole,
    AgentStatus,
    CommandKind,
    EntryType,
    SteerUrgency,
    new_agent_id,
)
from common.ids import create_with_unique_id, fresh_ids
from events_app.events import AGENTS_STREAM, record_event
from memory_app.services import write_entry

MAX_STEER_CONTEXT = 20_000


class AgentCommandRefused(Exception):
    """The command cannot apply to this agent now (it finished, is not paused, ...)."""


def _check_command(agent: Agent, kind: CommandKind, payload: dict) -> None:
    if agent.is_finished:
        raise AgentCommandRefused(f"{agent.id} is {agent.status}; it no longer takes commands")
    if kind == CommandKind.PAUSE:
        _check_pause(agent)
    if kind == CommandKind.RESUME and agent.status != AgentStatus.PAUSED:
        raise AgentCommandRefused(f"{agent.id} is {agent.status}, not paused")
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


def _check_pause(agent: Agent) -> None:
    # A pause must be real (the run's processes suspended) or refused, never only a word.
    if agent.status == AgentStatus.PAUSED:
        raise AgentCommandRefused(f"{agent.id} is already paused")
    if agent.status == AgentStatus.IDLE and agent.role == AgentRole.EXECUTOR:
        raise AgentCommandRefused(
            f"{agent.id} has not started yet (idle or queued): only a running agent can be "
            "paused; stop it to cancel it"
        )
    backend = (agent.config or {}).get("backend", "subprocess")
    # A SLURM job is suspended with scontrol (its executor refuses while it is pending).
    if agent.role == AgentRole.EXECUTOR and backend not in ("subprocess", "slurm"):
        raise AgentCommandRefused(
            f"{agent.id} runs the {backend} backend, which has no process to suspend: "
            "it cannot be paused (stop it instead)"
        )


@transaction.atomic
def request_agent_command(
    *, agent_id: str, kind: CommandKind, payload: dict | None = None, user=None
) -> AgentCommand:
    """Queue a command for the daemon hosting the agent. Raises Agent.DoesNotExist for an
    unknown agent and AgentCommandRefused, with the reason, for one that cannot apply."""
    agent = Agent.objects.select_for_update().get(pk=agent_id)
    payload = payload or {}
    _check_command(agent, kind, payload)
    unclaimed = {CommandKind.PAUSE: AgentStatus.IDLE, CommandKind.RESUME: AgentStatus.PAUSED}
    if agent.host_id is None and unclaimed.get(kind) == agent.status:
        # No daemon has taken it yet (a loop paused in its first second): the row itself is
        # held (no daemon claims a paused agent) or let go again.
        return _hold_unclaimed(agent, kind, user)
    command = AgentCommand.objects.create(
        agent=agent, kind=kind, payload=payload, requested_by=user
    )
    with connection.cursor() as cursor:  # delivered at commit, with the row visible
        cursor.execute("SELECT pg_notify(%s, %s)", [COMMANDS_CHANNEL, agent_id])
    return command


def _hold_unclaimed(agent: Agent, kind: CommandKind, user) -> AgentCommand:
    """Pause (or resume) an agent no daemon has claimed: its row says paused (or idle
    again, and the daemons are woken to claim it). Called with the row locked."""
    pausing = kind == CommandKind.PAUSE
    agent.status = AgentStatus.PAUSED if pausing else AgentStatus.IDLE
    agent.save(update_fields=["status", "updated_at"])
    record_event(
        stream=AGENTS_STREAM,
        kind="paused" if pausing else "resumed",
        agent_id=agent.id,
        payload={"status": str(agent.status), "parent_id": agent.parent_id, "unclaimed": True},
    )
    if not pausing:
        with connection.cursor() as cursor:  # delivered at commit: a daemon claims it now
            cursor.execute("SELECT pg_notify(%s, %s)", [AGENTS_CHANNEL, agent.id])
    return AgentCommand.objects.create(
        agent=agent,
        kind=kind,
        payload={},
        requested_by=user,
        status=CommandStatus.DELIVERED,
        detail="paused before any runagentd took it" if pausing else "waiting for a runagentd",
    )


def steer_agent(*, agent_id: str, context: str, urgency: str, user=None):
    """Steer in one of three tiers (SteerUrgency). CRITICAL and PRIORITY go to the daemon;
    MESSAGE lands in the agent's inbox at once. Returns the AgentCommand or MemoryEntry."""
    payload = {"context": context.strip(), "urgency": urgency}
    if urgency != SteerUrgency.MESSAGE:
        return request_agent_command(
            agent_id=agent_id, kind=CommandKind.STEER, payload=payload, user=user
        )

    with transaction.atomic():
        agent = Agent.objects.select_for_update().get(pk=agent_id)
        _check_command(agent, CommandKind.STEER, payload)
        return write_entry(
            type=EntryType.MESSAGE,
            agent_id=f"user:{user.get_username()}" if user else "user",
            target_id=agent.id,
            project=agent.project,
            session=agent.session,
            sweep=agent.sweep,
            run=agent.run,
            role="user",
            tags=["steer"],
            data={"context": payload["context"]},
        )


class ExecutorQueue(Protocol):
    """How an executor agent enters the GPU queue. The scheduler app, above this one,
    installs itself (`scheduler_app.queue.claims`) when Django loads it."""

    def validate_gpu_required(self, value) -> int:
        """The GPU count, or ValueError saying why it can never be met."""
        ...

    def submit(self, *, agent: Agent, gpu_required: int) -> object: ...


_executor_queue: ExecutorQueue | None = None


def install_executor_queue(queue: ExecutorQueue) -> None:
    global _executor_queue
    _executor_queue = queue


def _the_executor_queue() -> ExecutorQueue:
    if _executor_queue is None:
        raise RuntimeError("no executor queue installed: is scheduler_app in INSTALLED_APPS?")
    return _executor_queue


def create_agent(
    *,
    role: AgentRole | str,
    cls_path: str,
    goal: str,
    config: dict,
    project: str,
    session: str = "",
    sweep: str = "",
    run: str = "",
    parent_id: str | None = None,
    chat_session_id: str | None = None,
    host_id: int | None = None,
    first_id: str | None = None,
) -> Agent:
    """Insert a new agent row, idle: the one place an agent is created (create_agents, for
    many at once, beside it). Its id is
    `{role}-{uuid8}` (`first_id`, when the caller picked one already, unless it is taken); a
    clash gets a fresh one. The caller does what makes it start (a NOTIFY, the GPU queue, a
    daemon hosting it) and records its events."""
    return create_with_unique_id(
        Agent,
        lambda: new_agent_id(role),
        first_id=first_id,
        role=role,
        cls_path=cls_path,
        goal=goal,
        config=config,
        project=project,
        session=session,
        sweep=sweep,
        run=run,
        parent_id=parent_id,
        chat_session_id=chat_session_id,
        host_id=host_id,
    )


def create_agents(rows: list[dict]) -> list[Agent]:
    """create_agent for many agents at once (a batch of runs): one INSERT, in `rows`' order
    (each row create_agent's keywords, but `first_id`), the ids drawn as create_agent draws
    them, none taken."""
    fields = [{**row, "role": str(row["role"])} for row in rows]
    ids = fresh_ids(Agent, [functools.partial(new_agent_id, row["role"]) for row in fields])
    return Agent.objects.bulk_create(
        Agent(id=agent_id, **row) for agent_id, row in zip(ids, fields, strict=True)
    )


class AgentStartRefused(ValueError):
    """The agent's config cannot work (a bad gpu_required, a workdir that is no directory)."""


@transaction.atomic
def request_agent_start(
    *,
    cls_path: str,
    goal: str,
    config: dict | None = None,
    project: str,
    session: str = "",
    chat_session_id: str | None = None,
) -> Agent:
    """Ask for a top-level agent. The class must be on the allow-list: nothing else is ever
    imported. An executor goes through the GPU queue like every other (a runagentd starts it
    on the GPUs its claim books, `gpu_required` of them) and works in AGENTSYS_WORKDIR unless
    its config names a workdir; any other agent is claimed by a runagentd at once (SKIP
    LOCKED, so exactly one). Raises AgentStartRefused for a config that cannot work."""
    from django.conf import settings

    cls = AgentClassRegistry(settings.AGENTSYS.extra_agent_classes).resolve(cls_path)
    config = dict(config or {})
    executor = cls.role == AgentRole.EXECUTOR
    if executor:
        config = _executor_config(config, default_workdir=str(settings.AGENTSYS_WORKDIR))
    agent = create_agent(
        role=cls.role,
        cls_path=cls_path,
        goal=goal,
        config=config,
        project=project,
        session=session,
        chat_session_id=chat_session_id,
    )
    if executor:
        _the_executor_queue().submit(agent=agent, gpu_required=config["gpu_required"])
        agent.refresh_from_db()  # queued, or rejected with the reason
        return agent
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_notify(%s, %s)", [AGENTS_CHANNEL, agent.id])
    return agent


def _executor_config(config: dict, *, default_workdir: str) -> dict:
    """An executor's config with its workdir and gpu_required always set: the executor never
    falls back to the web's or the daemon's current directory (the checkout)."""
    try:
        gpu_required = _the_executor_queue().validate_gpu_required(config.get("gpu_required", 0))
    except ValueError as error:
        raise AgentStartRefused(f"config.{error}") from None
    workdir = config.get("workdir")
    if not workdir:  # the default is ours (settings checked a given AGENTSYS_WORKDIR exists)
        workdir = default_workdir
        Path(workdir).mkdir(parents=True, exist_ok=True)
    if not isinstance(workdir, str) or not Path(workdir).is_dir():
        raise AgentStartRefused(f"config.workdir: {workdir!r} is not a directory")
    return {**config, "workdir": workdir, "gpu_required": gpu_required}
