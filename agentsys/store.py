"""What the runtime needs from the database, as a Protocol. The Django implementation is
runtime_app.runtime_store.DjangoRuntimeStore; every method is synchronous and runs on the
daemon's database thread. Methods that change state return the event they recorded (the
message dict to publish), or None when nothing changed. A database that cannot be reached
raises StoreUnavailable, which the daemon waits out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from agentsys.agent import Scope
from agentsys.types import AgentStatus


@dataclass(frozen=True)
class AgentRecord:
    id: str
    role: str
    cls_path: str
    parent_id: str | None
    goal: str
    config: dict
    scope: Scope
    status: AgentStatus
    host_id: int | None = None
    chat_session_id: str | None = None
    pid: int | None = None
    pid_start: int | None = None  # when process `pid` started (agentsys.proctree start_time)
    # Set by a claim that started it already (claim_queue's started_pid): its "started"
    # event, for the daemon to publish; the supervisor then records no start of its own.
    started_event: dict | None = None


@dataclass(frozen=True)
class CommandRecord:
    id: int
    agent_id: str
    kind: str
    payload: dict


class StoreUnavailable(Exception):
    """The database cannot be reached now (restarting, down). Nothing was stored; the call
    may be repeated once it answers again. Implementations raise it, and only it, for that."""


class RuntimeStore(Protocol):
    # hosts
    def register_host(
        self,
        *,
        name: str,
        pid: int,
        gpus: list[dict],
        slurm: str | None = None,
        labels: dict | None = None,
    ) -> int: ...
    def record_heartbeat(self, *, host_id: int) -> bool: ...  # True: it had been declared dead
    def mark_host_offline(self, *, host_id: int) -> None: ...
    def declare_dead_hosts(self, *, stale_after: float) -> list[dict]: ...
    def record_foreign_gpu_use(self, *, host_id: int, processes: list[dict]) -> list[int]: ...
    # Called on a thread of its own (a pass may take minutes): what was done, in words. `stop`
    # (a threading.Event) set: the pass ends after the series it is on.
    def compact_old_metrics(self, *, older_than_days: float, stop=None) -> str: ...

    # agents
    def create_agent(self, *, record: AgentRecord) -> dict: ...
    def get_agent(self, *, agent_id: str) -> AgentRecord: ...
    def transition(
        self, *, agent_id: str, status: AgentStatus, kind: str, payload: dict, **fields
    ) -> dict | None: ...
    def record_event(self, *, agent_id: str, kind: str, payload: dict) -> dict: ...
    def mark_stopped(self, *, agent_id: str) -> dict | None: ...
    def live_descendant_levels(self, *, agent_id: str) -> list[list[str]]: ...
    def supersede(self, *, old_id: str, new_id: str, context: str) -> dict: ...
    def cancel_queued_requests(self, *, parent_ids: list[str]) -> list[dict]: ...
    def claim_pending_agents(self, *, host_id: int, limit: int) -> list[AgentRecord]: ...
    def lost_agents(self, *, host_id: int) -> list[AgentRecord]: ...
    def readopt_lost_runs(self, *, host_id: int) -> list[dict]: ...

    # the executor queue
    def create_queued_agent(self, *, record: AgentRecord, gpu_required) -> dict: ...
    def find_child(self, *, parent_id: str, experiment: dict) -> str | None: ...
    def claim_queue(
        self,
        *,
        host_id: int,
        policy: str,
        shares: dict | None = None,
        slurm_slots: int = 0,
        started_pid: int | None = None,
        started_classes: frozenset[str] = frozenset(),
    ) -> list[AgentRecord]: ...
    def agent_statuses(self, *, agent_ids: list[str]) -> dict[str, tuple[str, str]]: ...

    # commands from the web
    def claim_commands(self, *, host_id: int, limit: int) -> list[CommandRecord]: ...
    def finish_command(self, *, command_id: int, delivered: bool, detail: str) -> None: ...

    def close(self) -> None: ...
