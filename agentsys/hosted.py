"""What a supervisor keeps per hosted agent, the link a local (in-daemon) agent talks
through, and the process-group signalling both the supervisor and its controls use."""

from __future__ import annotations

import asyncio
import contextlib
import os
from dataclasses import dataclass, field
from typing import Protocol

from agentsys.agent import Agent, Scope
from agentsys.ipc import Ev, PipeChannel
from agentsys.store import AgentRecord
from agentsys.types import AgentStatus


@dataclass
class Hosted:
    """An agent this daemon runs right now."""

    record: AgentRecord
    cls: type[Agent]
    inbox: asyncio.Queue = field(default_factory=asyncio.Queue)
    process: object | None = None  # multiprocessing Process (worker agents)
    channel: PipeChannel | None = None
    local: Agent | None = None  # the agent itself (local agents)
    stop_requested: bool = False
    superseded: bool = False
    leave_row: bool = False  # shut down to be resumed by the next runagentd: record nothing
    restarts: int = 0  # workers relaunched after dying under a resumable agent
    start_paused: bool = False  # resumed after a restart while paused: it stays paused
    paused: bool = False  # it said it paused, and no resume has been sent since
    finished: bool = False
    exited: asyncio.Event = field(default_factory=asyncio.Event)
    # Commands sent while its worker was still being taken (a child's end told to a parent
    # that is resuming after a restart): sent once the worker has its spec.
    unsent: list[dict] = field(default_factory=list)
    pid_start: int = 0  # when its worker started (clock ticks after boot; its start report)

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def pid(self) -> int | None:
        return getattr(self.process, "pid", None)

    def send(self, message: dict) -> bool:
        """Send a command to its worker; kept for later while it has none yet."""
        if self.channel is None:
            self.unsent.append(message)
            return True
        return self.channel.send(message)

    def attach(self, process, channel: PipeChannel) -> None:
        """Its worker, which has been sent its spec: the commands kept meanwhile follow."""
        self.process, self.channel = process, channel
        waiting, self.unsent = self.unsent, []
        for message in waiting:
            channel.send(message)


class LocalSupervisor(Protocol):
    """What a LocalLink calls on the supervisor (agentsys.supervisor), named here so that the
    supervisor imports this module and this module never imports the supervisor."""

    async def spawn(
        self, *, cls_path: str, goal: str, parent_id: str | None, config: dict, scope: Scope | None
    ) -> str: ...

    async def stop(self, agent_id: str) -> list[str]: ...

    def watch_children(self, parent_id: str, child_ids: list[str]) -> None: ...


class LocalLink:
    """RuntimeLink for agents running inside runagentd: calls go straight to the supervisor."""

    def __init__(self, supervisor: LocalSupervisor, hosted: Hosted):
        self.supervisor, self.hosted = supervisor, hosted

    async def spawn(self, parent, cls_path, goal, config, scope) -> str:
        return await self.supervisor.spawn(
            cls_path=cls_path, goal=goal, parent_id=parent.id, config=config, scope=scope
        )

    async def stop(self, target_id: str) -> None:
        await self.supervisor.stop(target_id)

    def status_changed(self, agent, status) -> None:
        self.hosted.inbox.put_nowait(
            {"t": Ev.PAUSED if status == AgentStatus.PAUSED else Ev.RESUMED}
        )

    def emit(self, agent, kind, payload) -> None:
        self.hosted.inbox.put_nowait({"t": Ev.EMIT, "kind": kind, "payload": payload})

    def watch_children(self, agent, child_ids) -> None:
        self.supervisor.watch_children(agent.id, child_ids)


async def wait_set(event: asyncio.Event, timeout: float) -> bool:
    """Wait for `event`; False if `timeout` seconds passed first."""
    try:
        await asyncio.wait_for(event.wait(), timeout)
        return True
    except TimeoutError:
        return False


def signal_group(pid: int | None, sig: int) -> None:
    if not pid:
        return
    try:
        os.killpg(pid, sig)  # the worker leads its own session: this reaches its shells too
    except ProcessLookupError:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)  # not yet a group leader (it had just started)
