"""The one interface between chat and the database: what a chat turn reads and writes, from
the daemon's chat step (claiming turns, finding a session's L1 agent) to the L1 SessionAgent
(beginning, streaming, finishing a turn; starting and commanding its children). No Django
here: runtime_app.chat_store.DjangoChatStore implements it; tests may bring their own.

Every method is synchronous and runs on the daemon's database thread (`ChatLink.db`), which
waits out a database outage (StoreUnavailable, as for agentsys.store.RuntimeStore). Methods
that record events return them (the message dicts to publish live, in order)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
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
    title_unwritten: bool = False  # no model wrote the chat's title yet (agentsys.chat.titles)
    variables: dict = field(default_factory=dict)  # the prompt's {{...}} values


@dataclass(frozen=True)
class TurnOutcome:
    status: str  # done | failed | stopped | interrupted
    text: str = ""  # the answer with its action tags removed
    thinking: str = ""
    parts: list = field(default_factory=list)
    error: str = ""
    actions: list = field(default_factory=list)
    title: str = ""  # the OpenCode session's title, if any
    steps: list = field(default_factory=list)  # its paid model steps, for the ledger


@dataclass(frozen=True)
class BegunTurn:
    context: TurnContext | None  # None: stopped before it began, and closed here
    events: list = field(default_factory=list)  # recorded on the way (a system message)


class ChatStore(Protocol):
    # -- the daemon's chat step -------------------------------------------------------------
    def claim_turns(self, *, host_id: int, limit: int = 20) -> list[tuple[str, str]]: ...
    def stop_requests(self, *, host_id: int) -> list[tuple[str, str]]: ...
    def interrupt_lost_turns(self, *, host_id: int) -> list[dict]: ...
    # {"record": the L1's AgentRecord, "event": its "created" event or None}
    def session_agent(self, *, session_id: str, host_id: int) -> dict: ...

    # -- one turn (the L1 agent) ------------------------------------------------------------
    def begin_turn(self, *, turn_id: str, agent_id: str) -> BegunTurn | None: ...
    def save_prompt(self, *, turn_id: str, prompt: str, skill_id: str, variables: dict) -> None: ...
    def set_opencode_session(self, *, session_id: str, opencode_session_id: str) -> None: ...
    def emit(self, *, session_id: str, events: list[tuple[str, dict]]) -> list[dict]: ...
    def finish_turn(self, *, turn_id: str, outcome: TurnOutcome) -> list[dict]: ...
    # The paid steps of its OpenCode session, recorded again by their keys after a restart.
    def record_session_steps(self, *, session_id: str, steps: list[dict]) -> None: ...
    # The chat's title, written by a model step (agentsys.chat.titles): its steps recorded,
    # and the title set ('' for none) unless the person named the chat themselves.
    def record_title(self, *, session_id: str, title: str, steps: list[dict]) -> list[dict]: ...

    # -- the L1's children ------------------------------------------------------------------
    def live_children(self, *, agent_id: str) -> list[str]: ...
    def start_research(
        self,
        *,
        agent_id: str,
        session_id: str,
        goal: str,
        max_iterations: int | None,
        workdir: str = "",
    ) -> str: ...
    def command_child(self, *, session_id: str, target: str, kind: str, context: str) -> str: ...
    def child_report(self, *, agent_id: str) -> dict: ...
    def enqueue_synthetic(self, *, session_id: str, message: str, child_id: str) -> str: ...


@dataclass(frozen=True)
class ChatLink:
    """What an in-daemon chat agent holds: the store, and how to call it. The daemon gives
    its own `db` (a call on the database thread, waiting out an outage; `_streaming=True`:
    on the reply stream's thread), `publish` (live, in order) and `wake` (its loop looks
    at everything: a queued turn or a new agent is claimed at once)."""

    store: ChatStore
    db: Callable[..., Awaitable]
    publish: Callable[[dict], Awaitable]
    wake: Callable[[], None]

    async def publish_all(self, events: list[dict]) -> None:
        for event in events:
            await self.publish(event)
