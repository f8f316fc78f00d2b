"""Request and response shapes of the agents REST API (agents_app.api)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Schema
from pydantic import ConfigDict, Field, StringConstraints

from agents_app.services import MAX_STEER_CONTEXT
from agentsys.types import END_STATE_HELP, AgentStatus, SteerUrgency


class ErrorOut(Schema):
    detail: str


class AgentStartIn(Schema):
    """Start a top-level agent; a runagentd claims it. Only allow-listed classes."""

    model_config = ConfigDict(extra="forbid")

    cls_path: Annotated[str, StringConstraints(strip_whitespace=True, min_length=3, max_length=200)]
    goal: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=20_000)]
    config: dict[str, Any] = Field(default_factory=dict)
    project: Annotated[str, StringConstraints(strip_whitespace=True, max_length=100)] = ""
    session: Annotated[str, StringConstraints(strip_whitespace=True, max_length=100)] = ""


class AgentOut(Schema):
    id: str
    role: str
    status: AgentStatus = Field(
        description=f"idle (or queued for a GPU), running, paused. {END_STATE_HELP}"
    )
    goal: str
    cls_path: str
    config: dict[str, Any]
    parent_id: str | None
    chat_session_id: str | None
    superseded_by_id: str | None
    project: str
    session: str
    sweep: str
    run: str
    host: str | None
    pid: int | None
    iteration: int
    error: str
    result: Any
    heartbeat_at: datetime | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    updated_at: datetime

    @staticmethod
    def resolve_host(agent) -> str | None:
        return agent.host.name if agent.host_id else None


class EventOut(Schema):
    """`Event.as_message()`: `id` is the seq within `stream`, the resume point of a feed."""

    id: int
    stream: str
    kind: str
    agent_id: str
    payload: dict[str, Any]
    created_at: datetime


class AgentDetailOut(AgentOut):
    # Read from attributes the view sets on the agent (`children` is its related manager).
    children: list[str] = Field(validation_alias="child_ids")
    events: list[EventOut] = Field(validation_alias="recent_events")


class AgentNode(Schema):
    id: str
    role: str
    status: AgentStatus = Field(description=END_STATE_HELP)
    goal: str
    iteration: int
    superseded_by_id: str | None
    created_at: datetime
    children: list[AgentNode]


SteerContext = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_STEER_CONTEXT)
]


class SteerIn(Schema):
    model_config = ConfigDict(extra="forbid")  # a misspelt field is an error, not ignored

    context: SteerContext
    urgency: SteerUrgency = SteerUrgency.PRIORITY


class SteerOut(Schema):
    agent_id: str
    urgency: SteerUrgency
    # queued: a command for the daemon (critical, priority); delivered_to_inbox: a message
    # entry the agent reads at its next context assembly.
    status: Literal["queued", "delivered_to_inbox"]
    command_id: int | None = None
    entry_key: str | None = None


class CommandOut(Schema):
    command_id: int
    agent_id: str
    kind: str
    status: Literal["queued"] = "queued"
