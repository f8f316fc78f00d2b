"""What the L1 SessionAgent needs from the runtime around it (no Django here): a turn's
context, the session's event stream, the turn's end, and its children. runagentd provides it
(agentsys.chat.daemon_port over runtime_app.chat_store); tests may provide their own."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class TurnContext:
    turn_id: str
    session_id: str
    mode: str  # wild | auto | agent
    message: str  # the person's message, or the system report of a synthetic turn
    synthetic: bool
    workdir: str
    model_provider: str
    model_id: str
    opencode_session_id: str
    after_interrupt: bool = False  # the last turn was cut off: OpenCode may still work on it
    variables: dict = field(default_factory=dict)  # the prompt's {{...}} values


@dataclass(frozen=True)
class TurnOutcome:
    status: str  # done | failed | stopped | interrupted
    text: str = ""  # the answer with its action tags removed
    thinking: str = ""
    parts: list = field(default_factory=list)
    error: str = ""
    actions: list = field(default_factory=list)
    title: str = ""  # OpenCode's generated title, if any


class ChatPort(Protocol):
    async def begin_turn(self, turn_id: str, agent_id: str) -> TurnContext | None: ...
    async def save_prompt(
        self, turn_id: str, prompt: str, skill_id: str, variables: dict
    ) -> None: ...
    async def set_opencode_session(self, session_id: str, opencode_session_id: str) -> None: ...
    async def emit(self, session_id: str, turn_id: str, events: list[tuple[str, dict]]) -> None: ...
    async def finish_turn(self, ctx: TurnContext, outcome: TurnOutcome) -> None: ...
    async def start_research(
        self, agent_id: str, session_id: str, goal: str, max_iterations: int | None
    ) -> str: ...
    async def command_child(
        self, session_id: str, target: str, kind: str, context: str = ""
    ) -> str: ...
    async def child_report(self, agent_id: str) -> dict: ...
    async def enqueue_synthetic(self, session_id: str, message: str, child_id: str) -> str: ...
    async def live_children(self, agent_id: str) -> list[str]: ...
    def wake(self) -> None: ...
