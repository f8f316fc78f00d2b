"""The runtime's vocabulary. Django models take their choices from these enums, so the
database, the API and the runtime can never disagree on a status name."""

from __future__ import annotations

import secrets
from enum import StrEnum


class EndState(StrEnum):
    """The one word for each way something ends, shared by agents, queue requests, runs, sweeps
    and chat turns (and so by the API and the UI). Each status enum below uses these values
    for its end states and no other; tests/integration/test_status_vocabulary.py checks it."""

    DONE = "done"  # succeeded: the work ended by itself, without error (exit code 0)
    FAILED = "failed"  # ended with an error: raised, crashed, non-zero exit, its host died
    STOPPED = "stopped"  # a person or its parent stopped it after it had started
    CANCELLED = "cancelled"  # withdrawn before it ever started (never ran)
    REJECTED = "rejected"  # can never run as asked (more GPUs than any host has)
    LOST = "lost"  # a run that ended while nothing watched it, leaving no exit code
    INTERRUPTED = "interrupted"  # a chat reply cut off when the daemon streaming it died


END_STATES = frozenset(EndState)

# What the API schema says about every status field that can end.
END_STATE_HELP = (
    "End states share one vocabulary across agents, queue requests and runs: "
    "done (succeeded), failed (ended with an error), stopped (stopped by a person or its "
    "parent after it started), cancelled (withdrawn before it ever started), rejected (can "
    "never run as asked), lost (a run that ended unwatched, leaving no exit code), "
    "interrupted (a chat reply cut off when the daemon streaming it died; what came is kept)."
)


class AgentStatus(StrEnum):
    IDLE = "idle"  # created, or queued behind the scheduler
    RUNNING = "running"
    PAUSED = "paused"
    DONE = EndState.DONE.value
    FAILED = EndState.FAILED.value  # raised, crashed, or its host died
    STOPPED = EndState.STOPPED.value  # stopped by a person or its parent, never "done"
    CANCELLED = EndState.CANCELLED.value  # an executor withdrawn from the queue before it ran
    REJECTED = EndState.REJECTED.value  # an executor the queue can never place
    LOST = EndState.LOST.value  # an executor whose run ended unwatched, with no exit code

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_AGENT_STATUSES


# Not ended: the agent may still act (a queued executor is idle until its run starts).
LIVE_AGENT_STATUSES = (AgentStatus.IDLE, AgentStatus.RUNNING, AgentStatus.PAUSED)
TERMINAL_AGENT_STATUSES = frozenset(
    {
        AgentStatus.DONE,
        AgentStatus.FAILED,
        AgentStatus.STOPPED,
        AgentStatus.CANCELLED,
        AgentStatus.REJECTED,
        AgentStatus.LOST,
    }
)


class AgentRole(StrEnum):
    """What an agent is, and so its level. The role alone tells the levels apart: L1 is the
    chat session agent, the only `orchestrator` (research loops stored before they had a
    role of their own were relabelled `research` by a migration, their ids kept)."""

    ORCHESTRATOR = "orchestrator"  # L1 SessionAgent: one per chat, answers and delegates
    RESEARCH = "research"  # L2 ResearchAgent: the research loop
    EXECUTOR = "executor"  # L3: runs commands, GPU-gated by the scheduler
    SIDECAR = "sidecar"  # helpers that bypass the scheduler

    @property
    def level(self) -> int | None:
        """1, 2 or 3 for the three levels; None for a sidecar (outside them)."""
        return {"orchestrator": 1, "research": 2, "executor": 3}.get(self.value)


class TurnStatus(StrEnum):
    """A chat turn's state: one person's message and the session agent's reply to it."""

    QUEUED = "queued"  # a synthetic turn waiting for the session's running one
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    STOPPED = "stopped"
    INTERRUPTED = "interrupted"  # its daemon died mid-reply; the partial is kept


LIVE_TURN_STATUSES = (TurnStatus.QUEUED, TurnStatus.RUNNING)


class EntryType(StrEnum):
    PLAN = "plan"
    CONTEXT = "context"
    METRICS = "metrics"
    ALERT = "alert"
    RESULT = "result"
    REFLECTION = "reflection"
    MESSAGE = "message"
    RAW_FILE = "raw_file"


class SteerUrgency(StrEnum):
    CRITICAL = "critical"  # stop the subtree and respawn with the steer in the goal
    PRIORITY = "priority"  # delivered to the running agent's buffer
    MESSAGE = "message"  # written to the target's inbox


class RequestStatus(StrEnum):
    """An executor's place in the GPU queue. Once it leaves the queue it says what its run
    (and agent) say: they move together (scheduler_app.queue.lifecycle)."""

    QUEUED = "queued"
    RUNNING = "running"
    DONE = EndState.DONE.value
    FAILED = EndState.FAILED.value
    STOPPED = EndState.STOPPED.value
    CANCELLED = EndState.CANCELLED.value  # withdrawn while queued
    REJECTED = EndState.REJECTED.value
    LOST = EndState.LOST.value


# In the queue or holding its GPUs: not ended.
OPEN_REQUEST_STATUSES = (RequestStatus.QUEUED, RequestStatus.RUNNING)


class CommandKind(StrEnum):
    STOP = "stop"
    PAUSE = "pause"
    RESUME = "resume"
    STEER = "steer"


def new_agent_id(role: str) -> str:
    return f"{role}-{secrets.token_hex(4)}"


def new_id(prefix: str, hex_chars: int = 8) -> str:
    return f"{prefix}-{secrets.token_hex(hex_chars // 2)}"


def new_entry_key() -> str:
    return secrets.token_hex(6)


def choices(enum: type[StrEnum]) -> list[tuple[str, str]]:
    return [(member.value, member.name.replace("_", " ").title()) for member in enum]
