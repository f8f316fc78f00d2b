"""Entry point of a worker process: one L2/L3 agent in its own process and event loop.

Forked from runagentd's forkserver (whose preload already set Django up), so starting one
costs milliseconds. The worker makes itself a session leader first: the stop cascade can then
SIGTERM/SIGKILL the agent together with every shell it started.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection

from agentsys.agent import Agent, HierarchyError, Scope
from agentsys.deployment import Deployment
from agentsys.ipc import Cmd, Ev, PipeChannel
from agentsys.port_wiring import wire_ports
from agentsys.proctree import RunProcesses, process_info
from agentsys.registry import AgentClassRegistry
from agentsys.types import AgentStatus

logger = logging.getLogger("agentsys.worker")

ORPHAN_EXIT_SECONDS = 5.0  # how long a worker whose runagentd died may take to wind down
SHELL_GRACE_SECONDS = 1.0  # a shell left by a finished agent: SIGTERM, then SIGKILL

# Run in the worker once its agent is over. The host registers them from its forkserver
# preload (runagentd closes Django's database connections, so PostgreSQL does not log an
# unexpected EOF for every finished agent); agentsys itself knows no database.
exit_hooks: list[Callable[[], None]] = []


@dataclass(frozen=True)
class WorkerSpec:
    agent_id: str
    cls_path: str
    goal: str
    config: dict
    scope: dict
    allowed_classes: frozenset[str]
    resume: bool = False
    role: str = ""
    memory_factory: str = ""  # "module:attr" building the agent's MemoryView
    run_port_factory: str = ""  # "module:attr" building the agent's RunPort
    supervisor_pid: int = 0  # runagentd; its death is noticed even if the pipe stays open
    deployment: Deployment = field(default_factory=Deployment)
    extra: dict = field(default_factory=dict)


class WorkerLink:
    """The agent's RuntimeLink inside a worker: every request goes up the pipe."""

    def __init__(self, channel: PipeChannel):
        self.channel = channel
        self._pending: dict[str, asyncio.Future] = {}
        self._ids = itertools.count(1)

    async def spawn(
        self, parent: Agent, cls_path: str, goal: str, config: dict, scope: Scope
    ) -> str:
        request_id = f"{parent.id}:{next(self._ids)}"
        reply = asyncio.get_running_loop().create_future()
        self._pending[request_id] = reply
        self.channel.send(
            {
                "t": Ev.SPAWN_REQUEST,
                "request_id": request_id,
                "cls_path": cls_path,
                "goal": goal,
                "config": config,
                "scope": scope.as_dict(),
            }
        )
        response = await reply
        if "error" in response:
            error_cls = HierarchyError if response.get("kind") == "hierarchy" else RuntimeError
            raise error_cls(response["error"])
        return response["child_id"]

    def spawn_response(self, message: dict) -> None:
        reply = self._pending.pop(message["request_id"], None)
        if reply is not None and not reply.done():
            reply.set_result(message)

    async def stop(self, target_id: str) -> None:
        self.channel.send({"t": Ev.STOP_REQUEST, "target_id": target_id})

    def status_changed(self, agent: Agent, status: AgentStatus) -> None:
        self.channel.send({"t": Ev.PAUSED if status == AgentStatus.PAUSED else Ev.RESUMED})

    def emit(self, agent: Agent, kind: str, payload: dict) -> None:
        self.channel.send({"t": Ev.EMIT, "kind": kind, "payload": payload})

    def watch_children(self, agent: Agent, child_ids: list[str]) -> None:
        self.channel.send({"t": Ev.WATCH_CHILDREN, "child_ids": list(child_ids)})


def run_spare(conn: Connection) -> None:
    """A worker started before its agent was known (agentsys.spare_worker): its own session
    at once (a Ctrl-C meant for runagentd's terminal is not for it), then it waits for its
    WorkerSpec and runs that agent. EOF instead: it is not needed; it exits."""
    os.setsid()
    try:
        spec = conn.recv()
    except (EOFError, OSError):
        spec = None
    if isinstance(spec, WorkerSpec):
        run_worker(spec, conn)
        return
    for hook in exit_hooks:
        hook()


def run_worker(spec: WorkerSpec, conn: Connection) -> None:
    if os.getsid(0) != os.getpid():
        os.setsid()  # own session: the stop cascade kills the agent and its shells together
    asyncio.run(_serve(spec, PipeChannel(conn)))
    for hook in exit_hooks:
        hook()


async def _end_own_session() -> None:
    survivors = await RunProcesses.session_of(os.getpid()).terminate(grace=SHELL_GRACE_SECONDS)
    if survivors:
        logger.error("worker %s: processes %s survived SIGKILL", os.getpid(), survivors)


async def _serve(spec: WorkerSpec, channel: PipeChannel) -> None:
    try:
        cls = AgentClassRegistry(spec.allowed_classes).resolve(spec.cls_path)
    except Exception as exc:
        channel.send({"t": Ev.FAILED, "error": f"cannot load agent class: {exc}"})
        return
    agent = cls()
    link = WorkerLink(channel)
    config = {**spec.config, "resume": True} if spec.resume else spec.config
    agent.wire(
        agent_id=spec.agent_id, goal=spec.goal, config=config, scope=Scope(**spec.scope), link=link
    )
    agent.allowed_paths = spec.allowed_classes
    agent.deployment = spec.deployment
    wire_ports(
        agent,
        memory_factory=spec.memory_factory,
        run_port_factory=spec.run_port_factory,
        role=spec.role,
        scope=spec.scope,
    )
    gone = SupervisorGone(agent)
    listener = asyncio.create_task(_listen(channel, agent, link, gone))
    watcher = asyncio.create_task(_watch_supervisor(spec.supervisor_pid, gone))
    # Its start time with its pid: a later runagentd kills a leftover worker by this pair,
    # never the unrelated process that got the pid after it (pids wrap around).
    me = process_info(os.getpid())
    channel.send({"t": Ev.STARTED, "pid": os.getpid(), "pid_start": me and me.start_time})
    try:
        await agent.start()
        status = await agent.wait()
    except Exception as exc:  # on_start raised
        agent.status, agent.error = AgentStatus.FAILED, f"{type(exc).__name__}: {exc}"
        status = agent.status
    listener.cancel()
    watcher.cancel()
    # The agent is over: so is any shell it started (an executor's run has a session of its
    # own, and is not among these). Before its end is told: runagentd records that end at
    # once, and a stopped agent must not be seen stopped while its shells still run.
    await _end_own_session()
    channel.send(_terminal_message(agent, status))


def _terminal_message(agent: Agent, status: AgentStatus) -> dict:
    if status == AgentStatus.DONE:
        return {"t": Ev.DONE, "result": jsonable(agent.result)}
    if status == AgentStatus.STOPPED:
        return {"t": Ev.STOPPED}
    return {"t": Ev.FAILED, "error": agent.error or "failed", "traceback": agent.error_traceback}


async def _listen(
    channel: PipeChannel, agent: Agent, link: WorkerLink, gone: SupervisorGone
) -> None:
    while True:
        message = await channel.recv()
        if message is None:
            await gone()
            return
        kind = message["t"]
        if kind == Cmd.STOP:
            await agent.stop()
        elif kind == Cmd.SPAWN_RESPONSE:
            link.spawn_response(message)
        else:
            agent.apply_command(message)


async def _watch_supervisor(pid: int, gone: SupervisorGone) -> None:
    """Wait for runagentd to exit. Pipe EOF says the same, but only once every copy of the
    supervisor's end is closed; a pidfd cannot be held open by anyone else."""
    if pid <= 0:
        return
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        await gone()
        return
    except (AttributeError, OSError):  # no pidfd on this kernel: the pipe alone tells
        return
    exited = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_reader(pidfd, exited.set)
    try:
        await exited.wait()
    finally:
        loop.remove_reader(pidfd)
        os.close(pidfd)
    await gone()


class SupervisorGone:
    """What a worker does when runagentd dies, once, whichever sign comes first.

    A resumable agent detaches, leaving its work running for the next runagentd to re-adopt;
    any other agent stops. Nobody is left to stop this process, so it ends itself if winding
    down hangs (one stuck thread would otherwise keep it forever)."""

    def __init__(self, agent: Agent):
        self.agent = agent
        self.happened = False

    async def __call__(self) -> None:
        if self.happened:
            return
        self.happened = True
        timer = threading.Timer(ORPHAN_EXIT_SECONDS, _force_exit)
        timer.daemon = True
        timer.start()
        await (self.agent.detach() if self.agent.resumable else self.agent.stop())


def _force_exit() -> None:
    logger.warning("worker %s: supervisor gone and shutdown hung; exiting", os.getpid())
    os._exit(1)


def jsonable(value):
    try:
        return json.loads(json.dumps(value, default=str))
    except (TypeError, ValueError):
        return repr(value)
