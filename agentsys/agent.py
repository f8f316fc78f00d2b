"""The Agent base class and ChildHandle (what a parent holds of each child).

An agent knows nothing of processes or databases: it talks to a `RuntimeLink`, which is the
pipe to the supervisor in a worker process, or the supervisor itself for in-process (L1)
agents. Lifecycle: IDLE → RUNNING ⇄ PAUSED → DONE | FAILED | STOPPED.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Protocol, TypeVar

from agentsys.deployment import Deployment
from agentsys.ipc import Cmd
from agentsys.types import AgentRole, AgentStatus

logger = logging.getLogger("agentsys.agent")

T = TypeVar("T")

# In an agent's config when runagentd restarts one that was paused: it starts paused.
START_PAUSED = "start_paused"


class HierarchyError(Exception):
    """A parent tried to spawn a child of a role it may not have."""


class PauseRefused(Exception):
    """An agent cannot honour a pause (its work cannot be suspended): it stays running and
    says why, rather than claiming a pause its work ignores."""


def hierarchy_error(parent_role: str, parent_id: str, child_role: str, allowed) -> HierarchyError:
    allowed_text = ", ".join(sorted(allowed)) or "none (it is a leaf)"
    return HierarchyError(
        f"{parent_role} agent {parent_id} may not spawn a {child_role} child; "
        f"allowed child roles: {allowed_text}"
    )


@dataclass(frozen=True)
class Scope:
    """Memory scope, widest first: project > session > sweep > run."""

    project: str
    session: str = ""
    sweep: str = ""
    run: str = ""

    def narrowed(self, **overrides: str) -> Scope:
        return replace(self, **{k: v for k, v in overrides.items() if v is not None})

    def as_dict(self) -> dict[str, str]:
        return {
            "project": self.project,
            "session": self.session,
            "sweep": self.sweep,
            "run": self.run,
        }


class RuntimeLink(Protocol):
    """What an agent may ask of the runtime that hosts it."""

    async def spawn(
        self, parent: Agent, cls_path: str, goal: str, config: dict, scope: Scope
    ) -> str: ...

    async def stop(self, target_id: str) -> None: ...

    def status_changed(self, agent: Agent, status: AgentStatus) -> None: ...

    def emit(self, agent: Agent, kind: str, payload: dict) -> None: ...

    def watch_children(self, agent: Agent, child_ids: list[str]) -> None: ...


@dataclass
class ChildHandle:
    """The same handle for in-process, worker and scheduled children. `id` is stable from
    queued to done, and follows a CRITICAL steer's respawn to the new agent."""

    id: str
    _link: RuntimeLink
    _status: AgentStatus = AgentStatus.IDLE
    error: str = ""
    _done: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def status(self) -> AgentStatus:
        return self._status

    def update(self, status: str, *, error: str = "", replaced_by: str = "") -> None:
        if replaced_by:
            self.id, self._status = replaced_by, AgentStatus.RUNNING
            self._done.clear()
            return
        self._status, self.error = AgentStatus(status), error or self.error
        if self._status.is_terminal:
            self._done.set()

    async def wait(self, timeout: float | None = None) -> AgentStatus:
        """Wait until the child finishes; TimeoutError if it has not within `timeout`."""
        await asyncio.wait_for(self._done.wait(), timeout)
        return self._status

    async def cancel(self) -> None:
        await self._link.stop(self.id)


class Agent:
    role: ClassVar[AgentRole] = AgentRole.SIDECAR
    allowed_children: ClassVar[frozenset[AgentRole]] = frozenset()
    monitor_interval: ClassVar[float] = 0.0  # seconds between on_monitor calls; 0 = none
    hosting: ClassVar[str] = "worker"  # "worker" (own process) or "local" (inside runagentd)
    resumable: ClassVar[bool] = False  # restarted with the same id after runagentd dies

    def __init__(self) -> None:
        self.id = ""
        self.goal = ""
        self.config: dict[str, Any] = {}
        self.scope = Scope(project="")
        self.status = AgentStatus.IDLE
        self.iteration = 0
        self.error = ""
        self.error_traceback = ""
        self.result: Any = None
        self._link: RuntimeLink | None = None
        self.memory = None  # an agentsys.memory.MemoryView, set by the runtime
        self.runs = None  # an agentsys.run_port.RunPort, set by the runtime
        self.deployment = Deployment()  # the deployment's model and OpenCode, set by the runtime
        self.allowed_paths: frozenset[str] = frozenset()  # the runtime's allow-list
        self._task: asyncio.Task | None = None
        self._resume = asyncio.Event()
        self._resume.set()
        self._paused = asyncio.Event()  # set while paused: what an interruptible step races
        self._paused_since = 0.0  # time.monotonic() of the pause now in force
        self._paused_total = 0.0  # seconds spent paused before it
        self.pause_lock = asyncio.Lock()  # one pause or resume at a time, in arrival order
        self._control_tasks: set[asyncio.Task] = set()
        self._steer_buffer: list[str] = []
        self._stop_requested = False
        self._run_loop_entered = False
        # Set when the supervisor vanished: end this process but leave the work (a user's
        # command) running, for the next runagentd to re-adopt.
        self.detached = False
        self.children: dict[str, ChildHandle] = {}
        # A child's status can arrive before spawn_child has made its handle (a request
        # rejected at submit): keep it until the handle exists.
        self._early_child_status: dict[str, tuple[str, str]] = {}

    def wire(
        self, *, agent_id: str, goal: str, config: dict, scope: Scope, link: RuntimeLink
    ) -> None:
        self.id, self.goal, self.config, self.scope, self._link = (
            agent_id,
            goal,
            config,
            scope,
            link,
        )

    # -- for subclasses ----------------------------------------------------------------------

    async def run(self) -> Any:
        raise NotImplementedError

    async def on_start(self) -> None:
        """Called before run(), in the agent's own process."""

    async def on_stop(self) -> None:
        """Called after run() ended, however it ended."""

    async def on_monitor(self) -> None:
        """Called every monitor_interval seconds while running."""

    async def until_next_look(self) -> None:
        """What the monitor loop waits between two on_monitor calls: monitor_interval seconds,
        or less for an agent that looks when what it watches changes."""
        await asyncio.sleep(self.monitor_interval)

    async def on_pause(self) -> None:
        """Called before the agent is marked paused: suspend work that does not wait in
        check_pause (a subprocess), or raise PauseRefused saying why it cannot be."""

    async def on_resume(self) -> None:
        """Called before the agent is marked running again: undo on_pause."""

    @classmethod
    async def end_leftovers(cls, agent_id: str, config: dict) -> None:
        """Called by the supervisor before it records the end of an agent whose worker is
        gone or will not stop: end work of the agent that outlives its process."""

    async def check_pause(self) -> None:
        """Wait here while paused; call it between steps of work."""
        await self._resume.wait()

    def active_clock(self) -> float:
        """A monotonic clock that stands still while the agent is paused: time limits
        (an experiment's) count only the time the agent ran, not a person's lunch break."""
        now = time.monotonic()
        paused = self._paused_total + (now - self._paused_since if self._paused.is_set() else 0)
        return now - paused

    async def interruptible(self, make_step: Callable[[], Awaitable[T]]) -> T:
        """`make_step()` run to its end, unless a pause comes first: then the step is
        cancelled, the agent waits for resume, and the step runs again from its start. For
        long waits a pause must not sit behind (a model's answer: cancelling a prompt aborts
        it), so each step must be safe to start again. A result that arrives together with
        the pause is dropped: once the pause is recorded, nothing acts on it."""
        while True:
            await self.check_pause()
            step = asyncio.ensure_future(make_step())
            paused = asyncio.ensure_future(self._paused.wait())
            try:
                done, _ = await asyncio.wait({step, paused}, return_when=asyncio.FIRST_COMPLETED)
            finally:  # also when this task is cancelled (a stop): the step ends with it
                paused.cancel()
                if not step.done():
                    step.cancel()
            if step in done and not self._paused.is_set():
                return step.result()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await step  # its own clean-up (an abort sent to OpenCode) finishes first

    def consume_steer(self) -> str | None:
        """The PRIORITY steers received since the last call, joined; None if there were none."""
        if not self._steer_buffer:
            return None
        text, self._steer_buffer = "\n".join(self._steer_buffer), []
        return text

    async def spawn_child(
        self, cls: type[Agent] | str, goal: str, config: dict | None = None, **scope_overrides: str
    ) -> ChildHandle:
        """Spawn a child (its scope inherited from ours, narrowed by `scope_overrides`)."""
        if isinstance(cls, type):
            if cls.role not in self.allowed_children:
                raise hierarchy_error(self.role, self.id, cls.role, self.allowed_children)
            cls_path = f"{cls.__module__}.{cls.__qualname__}"
        else:
            cls_path = cls
        assert self._link is not None
        child_id = await self._link.spawn(
            self, cls_path, goal, dict(config or {}), self.scope.narrowed(**scope_overrides)
        )
        handle = ChildHandle(child_id, self._link)
        self.children[child_id] = handle
        if child_id in self._early_child_status:
            status, error = self._early_child_status.pop(child_id)
            handle.update(status, error=error)
        return handle

    def adopt_children(self, child_ids: list[str]) -> list[ChildHandle]:
        """Handles for children spawned before this agent was resumed: the runtime tells it
        how each ends, even one that ended while no runagentd was up."""
        assert self._link is not None
        handles = []
        for child_id in child_ids:
            handle = self.children.get(child_id) or ChildHandle(child_id, self._link)
            self.children[child_id] = handle
            if child_id in self._early_child_status:
                status, error = self._early_child_status.pop(child_id)
                handle.update(status, error=error)
            handles.append(handle)
        self._link.watch_children(self, list(child_ids))
        return handles

    async def remember(self, type: str, data: dict, tags: list[str] | None = None) -> str | None:
        """Write a memory entry in this agent's scope (off the event loop)."""
        if self.memory is None:
            return None
        return await asyncio.to_thread(self.memory.write, type=type, data=data, tags=tags)

    async def remember_many(
        self, type: str, rows: list[dict], tags: list[str] | None = None
    ) -> int:
        """Write many entries of one type in one round trip (off the event loop)."""
        if self.memory is None or not rows:
            return 0
        return await asyncio.to_thread(self.memory.write_many, type=type, rows=rows, tags=tags)

    async def record_metrics(self, rows: list[dict], source: str = "jsonl") -> int:
        """A run's metric rows, read from `source`, into its series (off the event loop)."""
        if self.runs is None or not rows:
            return 0
        return await asyncio.to_thread(self.runs.write_metrics, rows=rows, source=source)

    async def in_memory(self, method: str, /, **kwargs):
        """Any other MemoryView call (query, read_self, msg, read_inbox, ack,
        assemble_context, memory_bank), off the event loop; None when no memory is attached."""
        if self.memory is None:
            return None
        return await asyncio.to_thread(getattr(self.memory, method), **kwargs)

    async def in_runs(self, method: str, /, **kwargs):
        """Any RunPort call (run_code, record_checkout, run_outcome, ...), off the event loop;
        None when no run port is attached."""
        if self.runs is None:
            return None
        return await asyncio.to_thread(getattr(self.runs, method), **kwargs)

    async def alert(
        self, severity: str, message: str, signature: str, data: dict | None = None, **extra: str
    ) -> str | None:
        """An ALERT entry plus an alert the person sees."""
        if self.memory is None:
            logger.warning("%s alert (no memory attached): %s", self.id, message)
            return None
        return await asyncio.to_thread(
            self.memory.raise_alert,
            severity=severity,
            message=message,
            signature=signature,
            data=data or {},
            **extra,
        )

    def emit_event(self, kind: str, payload: dict | None = None) -> None:
        """A custom event (iteration, log_entry, ...): stored in order and pushed live."""
        assert self._link is not None
        self._link.emit(self, kind, payload or {})

    # -- lifecycle, driven by the runtime ------------------------------------------------------

    async def start(self) -> None:
        # Paused before it started (a command that came with its worker): it stays so.
        paused_already = self.status == AgentStatus.PAUSED
        self.status = AgentStatus.RUNNING
        if paused_already or self.config.get(START_PAUSED):
            # Paused before runagentd restarted: it stays paused (its work, a run's
            # processes, still suspended) until a person resumes it.
            self.status = AgentStatus.PAUSED
            self._resume.clear()
            self._paused.set()
            self._paused_since = time.monotonic()
        await self.on_start()
        self._task = asyncio.create_task(self._run_loop(), name=f"agent:{self.id}")

    async def wait(self) -> AgentStatus:
        assert self._task is not None
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(self._task)
        return self.status

    async def _run_loop(self) -> None:
        self._run_loop_entered = True
        watchdog = None
        if self.monitor_interval > 0:
            watchdog = asyncio.create_task(self._watchdog_loop(), name=f"watchdog:{self.id}")
        try:
            if self._stop_requested:  # stopped while on_start ran: run() never starts
                raise asyncio.CancelledError
            self.result = await self.run()
            self.status = AgentStatus.DONE
        except asyncio.CancelledError:
            self.status = AgentStatus.STOPPED if self._stop_requested else AgentStatus.FAILED
            self.error = "" if self._stop_requested else "cancelled"
        except Exception as exc:
            self.status = AgentStatus.FAILED
            self.error = f"{type(exc).__name__}: {exc}"
            self.error_traceback = traceback.format_exc()
        finally:
            if watchdog is not None:
                watchdog.cancel()
            try:
                await self.on_stop()
            except Exception:
                logger.exception("%s: on_stop raised", self.id)

    async def _watchdog_loop(self) -> None:
        while not self.status.is_terminal:
            await self.until_next_look()
            await self.check_pause()
            try:
                await self.on_monitor()
            except Exception:  # a broken monitor must not take the agent down
                logger.exception("%s: on_monitor raised; the agent goes on", self.id)

    async def pause(self) -> None:
        async with self.pause_lock:
            if self.status == AgentStatus.IDLE and not self._stop_requested:
                self.mark_paused()  # nothing started yet to suspend: start() keeps it paused
                return
            if self.status != AgentStatus.RUNNING or self._stop_requested:
                return
            try:
                await self.on_pause()
            except Exception as refused:  # PauseRefused, or the suspend itself failed
                reason = str(refused) if isinstance(refused, PauseRefused) else repr(refused)
                logger.warning("%s: pause refused: %s", self.id, reason)
                self.emit_event("pause_refused", {"reason": reason})
                return
            if not self._stop_requested:  # a stop meanwhile: its end is the news
                self.mark_paused()

    def mark_paused(self) -> None:
        """Record the pause (its work already suspended); call with pause_lock held."""
        self.status = AgentStatus.PAUSED
        self._resume.clear()
        self._paused.set()
        self._paused_since = time.monotonic()
        self._notify(AgentStatus.PAUSED)

    async def resume(self) -> None:
        async with self.pause_lock:
            if self.status != AgentStatus.PAUSED or self._stop_requested:
                return
            await self.on_resume()
            self.status = AgentStatus.RUNNING
            self._paused_total += time.monotonic() - self._paused_since
            self._paused.clear()
            self._resume.set()
            self._notify(AgentStatus.RUNNING)

    def inject_steer(self, context: str) -> None:
        self._steer_buffer.append(context)

    def apply_command(self, message: dict) -> None:
        """A supervisor command that needs no event loop work of the runtime's own: pause,
        resume, steer, a child's status. (Stop and spawn replies each runtime handles.)"""
        kind = message["t"]
        if kind == Cmd.PAUSE:
            self._in_background(self.pause())
        elif kind == Cmd.RESUME:
            self._in_background(self.resume())
        elif kind == Cmd.STEER:
            self.inject_steer(message["context"])
        elif kind == Cmd.CHILD_STATUS:
            self.child_status(
                message["child_id"],
                message["status"],
                error=message.get("error", ""),
                replaced_by=message.get("replaced_by", ""),
            )
        elif not self.on_command(message):
            logger.warning("%s: ignoring unknown command %r", self.id, kind)

    def on_command(self, message: dict) -> bool:
        """A command only some agents know (an executor: its SLURM job's state); True if
        taken."""
        return False

    async def detach(self) -> None:
        """The supervisor is gone: end here without stopping what outlives us."""
        self.detached = True
        await self.stop()

    async def stop(self) -> None:
        self._stop_requested = True
        self._resume.set()
        # A task cancelled before its first step never enters _run_loop (no STOPPED status,
        # no on_stop); one not yet entered sees _stop_requested there instead.
        if self._task is not None and not self._task.done() and self._run_loop_entered:
            self._task.cancel()

    def child_status(
        self, child_id: str, status: str, *, error: str = "", replaced_by: str = ""
    ) -> None:
        handle = self.children.pop(child_id, None) if replaced_by else self.children.get(child_id)
        if handle is None:
            if not replaced_by:
                self._early_child_status[child_id] = (status, error)
            return
        handle.update(status, error=error, replaced_by=replaced_by)
        if replaced_by:
            self.children[replaced_by] = handle

    def _in_background(self, coro) -> None:
        # Pause and resume may signal processes and wait for them; the pause lock keeps them
        # in the order they came. Held here: asyncio keeps only a weak reference to a task.
        task = asyncio.get_running_loop().create_task(coro)
        self._control_tasks.add(task)
        task.add_done_callback(self._control_tasks.discard)

    def _notify(self, status: AgentStatus) -> None:
        if self._link is not None:
            self._link.status_changed(self, status)
