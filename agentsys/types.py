"""The runtime's vocabulary. Django models take their choices from these enums, so the
database, the API and the runtime can never disagree on a status name."""

from __future__ import annotations

import secrets
from enum import StrEnum


class AgentStatus(StrEnum):
    IDLE = "idle"  # created, or queued behind the scheduler
    RUNNING = "running"
    PAUSED = "paused"
    DONE = "done"  # finished its work
    FAILED = "failed"  # raised, crashed or was lost
    STOPPED = "stopped"  # someone stopped it (the original reported this as DONE)

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_AGENT_STATUSES


TERMINAL_AGENT_STATUSES = frozenset({AgentStatus.DONE, AgentStatus.FAILED, AgentStatus.STOPPED})


class AgentRole(StrEnum):
    ORCHESTRATOR = "orchestrator"  # L1 SessionAgent, L2 ResearchAgent
    EXECUTOR = "executor"  # L3: runs commands, GPU-gated by the scheduler
    SIDECAR = "sidecar"  # helpers that bypass the scheduler


class ScopeLevel(StrEnum):
    PROJECT = "project"
    SESSION = "session"
    SWEEP = "sweep"
    RUN = "run"


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
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    REJECTED = "rejected"
    CANCELLED = "cancelled"  # withdrawn while queued (the original folded this into FAILED)


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
