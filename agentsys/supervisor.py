"""The supervisor: spawns and tracks the agents one runagentd hosts.

Worker agents run in processes forked from a forkserver; local (L1) agents run in this event
loop. Everything an agent reports arrives as a message in its own inbox queue, handled in
order by one task per agent: state changes go to the database through the store (on the
daemon's database thread), and the resulting events are published live.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import signal
from collections.abc import Awaitable, Callable

from agentsys.agent import START_PAUSED, Agent, Scope, hierarchy_error
from agentsys.control import SupervisorControls
from agentsys.deployment import Deployment
from agentsys.hosted import Hosted, LocalLink
from agentsys.ipc import TERMINAL_EVENTS, Cmd, Ev, PipeChannel
from agentsys.port_wiring import wire_ports
from agentsys.registry import AgentClassRegistry
from agentsys.slurm.poller import JOB_EVENTS
from agentsys.spare_worker import SpareWorker
from agentsys.store import AgentRecord, RuntimeStore, StoreUnavailable
from agentsys.types import AgentRole, AgentStatus, new_agent_id
from agentsys.worker import WorkerSpec, jsonable

logger = logging.getLogger("agentsys.supervisor")

MAX_WORKER_RESTARTS = 3  # a resumable agent whose worker keeps dying is failed after this


class Supervisor(SupervisorControls):
    def __init__(
        self,
        *,
        store: RuntimeStore,
        db: Callable[..., Awaitable],
        publish: Callable[[dict], Awaitable],
        registry: AgentClassRegistry,
        host_id: int,
        mp_context,
        stop_grace: float = 5.0,
        use_scheduler: bool = True,
        memory_factory: str = "",
        run_port_factory: str = "",
        default_workdir: str = "",
        deployment: Deployment | None = None,
    ):
        self.store, self.db, self.publish = store, db, publish
        self.registry, self.host_id, self.mp = registry, host_id, mp_context
        self.stop_grace = stop_grace
        self.use_scheduler = use_scheduler
        self.memory_factory = memory_factory
        self.run_port_factory = run_port_factory
        self.default_workdir = default_workdir
        self.deployment = deployment or Deployment()
        self.hosted: dict[str, Hosted] = {}
        self.chat = None  # set by a daemon that serves chat: the ChatLink its L1 agents get
        # Queued children of agents hosted here: child id → parent id. Their parent is told
        # when they end, whichever daemon ran them (see tell_parents_of_finished_children).
        self.watched: dict[str, str] = {}
        self.slurm_poller = None  # set by a daemon that submits SLURM runs (slurm_poller)
        self.spare = SpareWorker(mp_context)  # the next worker agent's process, started
        self._tasks: set[asyncio.Task] = set()

    def background(self, coro, name: str) -> asyncio.Task:
        """Start a task and keep a reference until it ends (asyncio holds only a weak one)."""
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # -- spawning ---------------------------------------------------------------------------

    async def spawn(
        self,
        *,
        cls_path: str,
        goal: str,
        parent_id: str | None,
        config: dict,
        scope: Scope | None = None,
        agent_id: str | None = None,
        chat_session_id: str | None = None,
    ) -> str:
        """Create and start an agent; returns its id. Raises DisallowedAgentClass or
        HierarchyError before anything is stored."""
        cls = self.registry.resolve(cls_path)
        parent = await self.db(self.store.get_agent, agent_id=parent_id) if parent_id else None
        if parent is not None:
            parent_cls = self.registry.resolve(parent.cls_path)
            if cls.role not in parent_cls.allowed_children:
                raise hierarchy_error(parent.role, parent.id, cls.role, parent_cls.allowed_children)
            scope = scope or parent.scope
            chat_session_id = chat_session_id or parent.chat_session_id
        queued = self.use_scheduler and cls.role == AgentRole.EXECUTOR
        if queued:
            _check_gpu_required(config.get("gpu_required", 0))
            if self.default_workdir:
                config = {"workdir": self.default_workdir, **config}
        record = AgentRecord(
            id=agent_id or new_agent_id(cls.role),
            role=cls.role,
            cls_path=cls_path,
            parent_id=parent_id,
            goal=goal,
            config=config,
            scope=scope or Scope(project=config.get("project", "default")),
            status=AgentStatus.IDLE,
            host_id=None if queued else self.host_id,
            chat_session_id=chat_session_id,
        )
        if queued:
            return await self._submit(record, parent_id)
        created = await self.db(self.store.create_agent, record=record)
        if created["agent_id"] != record.id:  # its random id was taken: it got another
            record = dataclasses.replace(record, id=created["agent_id"])
        await self.publish(created)
        await self.launch(record, cls)
        return record.id

    async def _submit(self, record: AgentRecord, parent_id: str | None) -> str:
        """Executors go through the GPU queue, whoever spawns them; the id stays the same from
        queued to done. The row and its request are stored together. An experiment its loop
        launches again after a restart (same launch) is the one already spawned."""
        experiment = record.config.get("experiment")
        if parent_id and isinstance(experiment, dict) and experiment.get("launch"):
            found = await self.db(self.store.find_child, parent_id=parent_id, experiment=experiment)
            if found:
                self.watched[found] = parent_id  # ended or not, its parent is told
                return found
        outcome = await self.db(
            self.store.create_queued_agent,
            record=record,
            gpu_required=record.config.get("gpu_required", 0),
        )
        record = dataclasses.replace(record, id=outcome["created"]["agent_id"])
        await self.publish(outcome["created"])
        await self.publish(outcome["event"])
        if outcome["status"] == "rejected" and parent_id:
            self.send_to(
                parent_id,
                {
                    "t": Cmd.CHILD_STATUS,
                    "child_id": record.id,
                    "status": str(AgentStatus.REJECTED),
                    "error": outcome["reason"],
                },
            )
        elif parent_id:
            self.watched[record.id] = parent_id
        return record.id

    async def tell_parents_of_finished_children(self) -> None:
        """Queued children may run on another host, or end without running (cancelled);
        their parents here learn it from the database."""
        if not self.watched:
            return
        statuses = await self.db(self.store.agent_statuses, agent_ids=list(self.watched))
        for child_id, (status, error) in statuses.items():
            if AgentStatus(status).is_terminal and child_id not in self.hosted:
                parent_id = self.watched.pop(child_id)
                self.send_to(
                    parent_id,
                    {"t": Cmd.CHILD_STATUS, "child_id": child_id, "status": status, "error": error},
                )

    def watch_children(self, parent_id: str, child_ids: list[str]) -> None:
        """A resumed parent's children: whichever daemon runs them, and whether they ended
        before the parent came back or end later, the parent is told (by the next
        tell_parents_of_finished_children, or by the child itself when hosted here)."""
        for child_id in child_ids:
            self.watched[child_id] = parent_id

    async def launch(self, record: AgentRecord, cls: type[Agent], *, resume: bool = False):
        """Start an agent whose row exists (new, claimed, or resumed after a restart)."""
        self.watched.pop(record.id, None)  # hosted here now: its end reaches the parent directly
        # Paused when the last runagentd went: it starts paused and waits for a person.
        paused = resume and record.status == AgentStatus.PAUSED
        hosted = Hosted(record=record, cls=cls, start_paused=paused)
        config = {**record.config, START_PAUSED: True} if paused else record.config
        self.hosted[record.id] = hosted
        self.background(self._handle_inbox(hosted), f"inbox:{record.id}")
        if cls.hosting == "local":
            agent = cls()
            agent.wire(
                agent_id=record.id,
                goal=record.goal,
                config={**config, "resume": True} if resume else config,
                scope=record.scope,
                link=LocalLink(self, hosted),
            )
            agent.allowed_paths = self.registry.allowed
            agent.deployment = self.deployment
            if hasattr(agent, "attach_chat"):
                agent.attach_chat(self.chat)
            wire_ports(
                agent,
                memory_factory=self.memory_factory,
                run_port_factory=self.run_port_factory,
                role=str(record.role),
                scope=record.scope.as_dict(),
            )
            hosted.local = agent
            self.background(self._run_local(hosted, agent), f"local:{record.id}")
            return
        spec = WorkerSpec(
            agent_id=record.id,
            cls_path=record.cls_path,
            goal=record.goal,
            config=config,
            scope=record.scope.as_dict(),
            allowed_classes=self.registry.allowed,
            resume=resume,
            role=str(record.role),
            memory_factory=self.memory_factory,
            run_port_factory=self.run_port_factory,
            supervisor_pid=os.getpid(),
            deployment=self.deployment,
        )
        process, parent_end = await self.spare.take()  # started already: no fork to wait for
        channel = PipeChannel(parent_end)
        if not channel.send(spec):  # it died meanwhile: its exit is handled as any worker's
            logger.warning("%s: its worker process was gone before it started", record.id)
        hosted.attach(process, channel)
        loop = asyncio.get_running_loop()
        loop.add_reader(parent_end.fileno(), self._on_readable, hosted)
        loop.add_reader(process.sentinel, self._on_exit, hosted)

    async def _run_local(self, hosted: Hosted, agent: Agent) -> None:
        if hosted.record.started_event is None:  # else its claim started it (claim_queue)
            hosted.inbox.put_nowait({"t": Ev.STARTED, "pid": os.getpid()})
        try:
            await agent.start()
            status = await agent.wait()
        except Exception as exc:
            agent.status, agent.error = AgentStatus.FAILED, f"{type(exc).__name__}: {exc}"
            status = agent.status
        if status == AgentStatus.DONE:
            message = {"t": Ev.DONE, "result": jsonable(agent.result)}  # as a worker's
        elif status == AgentStatus.STOPPED:
            message = {"t": Ev.STOPPED}
        else:
            message = {"t": Ev.FAILED, "error": agent.error, "traceback": agent.error_traceback}
        hosted.inbox.put_nowait(message)
        hosted.inbox.put_nowait({"t": "exit", "code": 0})

    # -- messages from workers --------------------------------------------------------------

    def _on_readable(self, hosted: Hosted) -> None:
        messages, eof = hosted.channel.drain()
        for message in messages:
            hosted.inbox.put_nowait(message)
        if eof:
            asyncio.get_running_loop().remove_reader(hosted.channel.conn.fileno())

    def _on_exit(self, hosted: Hosted) -> None:
        loop = asyncio.get_running_loop()
        loop.remove_reader(hosted.process.sentinel)
        if not hosted.channel.closed:
            self._on_readable(hosted)  # what it sent just before exiting comes first
            with contextlib.suppress(ValueError, OSError):
                loop.remove_reader(hosted.channel.conn.fileno())
        hosted.process.join(0)
        hosted.inbox.put_nowait({"t": "exit", "code": hosted.process.exitcode})

    async def _handle_inbox(self, hosted: Hosted) -> None:
        while True:
            message = await hosted.inbox.get()
            try:
                if message["t"] == "exit":
                    await self._on_process_gone(hosted, message["code"])
                else:
                    await self._handle(hosted, message)
            except StoreUnavailable:  # only once the daemon stops: the next one reconciles
                logger.warning("%s: %s not recorded: no database", hosted.id, message.get("t"))
            except Exception:
                logger.exception("%s: could not handle %s", hosted.id, message.get("t"))
            if message["t"] == "exit":
                return

    async def _handle(self, hosted: Hosted, message: dict) -> None:
        kind = message["t"]
        if kind == Ev.STARTED:
            hosted.pid_start = message.get("pid_start") or 0
            paused = {"paused": True} if hosted.start_paused else {}
            await self._transition(
                hosted.id,
                AgentStatus.PAUSED if hosted.start_paused else AgentStatus.RUNNING,
                "started",
                {"pid": message.get("pid"), **paused},
                pid=message.get("pid"),
                pid_start=message.get("pid_start"),
            )
        elif kind in (Ev.PAUSED, Ev.RESUMED):
            status = AgentStatus.PAUSED if kind == Ev.PAUSED else AgentStatus.RUNNING
            await self._transition(hosted.id, status, str(kind), {})
            hosted.paused = kind == Ev.PAUSED
            if hosted.paused:
                self.background(self.pause_late_children(hosted), f"pause-late:{hosted.id}")
        elif kind == Ev.EMIT:
            payload = message.get("payload") or {}
            if message["kind"] in JOB_EVENTS and self.slurm_poller is not None:
                self.slurm_poller.watch(hosted.id, payload["job_id"])
            await self._record(hosted.id, message["kind"], payload)
        elif kind == Ev.SPAWN_REQUEST:
            await self._spawn_for(hosted, message)
        elif kind == Ev.WATCH_CHILDREN:
            self.watch_children(hosted.id, message.get("child_ids") or [])
        elif kind == Ev.STOP_REQUEST:
            self.background(self.stop(message["target_id"]), f"stop:{message['target_id']}")
        elif kind in TERMINAL_EVENTS:
            await self._finish(hosted, kind, message)

    async def _spawn_for(self, hosted: Hosted, message: dict) -> None:
        from agentsys.agent import HierarchyError

        reply = {"t": Cmd.SPAWN_RESPONSE, "request_id": message["request_id"]}
        try:
            reply["child_id"] = await self.spawn(
                cls_path=message["cls_path"],
                goal=message["goal"],
                parent_id=hosted.id,
                config=message.get("config") or {},
                scope=Scope(**message["scope"]),
            )
        except HierarchyError as exc:
            reply.update(error=str(exc), kind="hierarchy")
        except Exception as exc:
            reply.update(error=f"{type(exc).__name__}: {exc}", kind="other")
        hosted.channel.send(reply)

    async def _finish(self, hosted: Hosted, kind: Ev, message: dict) -> None:
        if hosted.finished or hosted.leave_row:  # left for the next runagentd to resume
            return
        hosted.finished = True
        if kind == Ev.DONE:
            status, payload = AgentStatus.DONE, {"result": message.get("result")}
        elif kind == Ev.STOPPED or hosted.stop_requested:
            status, payload = AgentStatus.STOPPED, {}
        else:
            status, payload = AgentStatus.FAILED, {"error": message.get("error", "")}
        await self.end_work_of(
            hosted, ended_itself=status == AgentStatus.DONE
        )  # before its GPUs are released
        await self._transition(
            hosted.id,
            status,
            str(status),
            payload,
            error=payload.get("error", ""),
            traceback=message.get("traceback", ""),
            result=message.get("result"),
        )
        await self._tell_parent(hosted, status, error=payload.get("error", ""))

    async def _on_process_gone(self, hosted: Hosted, code: int | None) -> None:
        if self._should_relaunch(hosted):
            # A resumable agent's worker died under it (its run outlives the worker): start
            # a new worker that re-adopts the work.
            self.hosted.pop(hosted.id, None)
            hosted.exited.set()
            await self._record(hosted.id, "worker_restarted", {"cause": _describe_exit(code)})
            restarts = hosted.restarts + 1
            await self.launch(hosted.record, hosted.cls, resume=True)
            self.hosted[hosted.id].restarts = restarts
            return
        try:
            if not hosted.finished and not hosted.leave_row:
                cause = _describe_exit(code)
                await self._finish(hosted, Ev.FAILED, {"error": cause})
        finally:  # gone is gone, recorded or not: a stop waiting for it must not hang
            self.hosted.pop(hosted.id, None)
            if self.slurm_poller is not None:
                self.slurm_poller.forget(hosted.id)
            hosted.exited.set()
            if hosted.channel is not None and not hosted.channel.closed:
                hosted.channel.close()

    def _should_relaunch(self, hosted: Hosted) -> bool:
        return (
            hosted.cls.resumable
            and hosted.process is not None
            and not hosted.finished
            and not hosted.stop_requested
            and not hosted.leave_row
            and hosted.restarts < MAX_WORKER_RESTARTS
        )

    async def _tell_parent(self, hosted: Hosted, status: AgentStatus, *, error: str = "") -> None:
        if hosted.superseded or not hosted.record.parent_id:
            return
        self.send_to(
            hosted.record.parent_id,
            {"t": Cmd.CHILD_STATUS, "child_id": hosted.id, "status": str(status), "error": error},
        )

    def send_to(self, agent_id: str, message: dict) -> bool:
        """Deliver a command to an agent hosted here; False if it is not."""
        target = self.hosted.get(agent_id)
        if target is None:
            return False
        if target.local is not None:
            self._apply_locally(target.local, message)
            return True
        return target.send(message)

    def _apply_locally(self, agent: Agent, message: dict) -> None:
        if message["t"] == Cmd.STOP:
            self.background(agent.stop(), f"stop:{agent.id}")
        else:
            agent.apply_command(message)

    # -- database + live events -------------------------------------------------------------

    async def _transition(
        self, agent_id: str, status: AgentStatus, kind: str, payload: dict, **fields
    ) -> bool:
        event = await self.db(
            self.store.transition,
            agent_id=agent_id,
            status=status,
            kind=kind,
            payload=payload,
            **fields,
        )
        if event is not None:
            await self.publish(event)
        return event is not None

    async def _record(self, agent_id: str, kind: str, payload: dict) -> None:
        await self.publish(
            await self.db(
                self.store.record_event,
                agent_id=agent_id,
                kind=kind,
                payload=payload,
            )
        )


def _check_gpu_required(value) -> None:
    # Checked before anything is stored: a bad value is the caller's error, not a failed run.
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"gpu_required must be a whole number ≥ 0, got {value!r}")


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "worker process vanished"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"worker process killed by {name}"
    return f"worker process exited with code {code} before reporting a result"
