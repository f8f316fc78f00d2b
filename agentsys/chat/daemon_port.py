"""The ChatPort runagentd gives its L1 agents, and the daemon's chat step: claiming the turns
the web stored, handing each to its session's L1 agent (started on demand), and passing on
stop requests. Store calls run on the daemon's database thread (waiting out an outage);
every event they record is published live from here."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from agentsys.chat.port import TurnContext, TurnOutcome
from agentsys.chat.prompt import variables_for

logger = logging.getLogger("agentsys.chat")


class DaemonChatPort:
    def __init__(self, *, store, db: Callable[..., Awaitable], publish, wake: Callable[[], None]):
        self.store, self.db, self.publish, self._wake = store, db, publish, wake

    async def _publish_all(self, events: list[dict]) -> None:
        for event in events:
            await self.publish(event)

    async def begin_turn(self, turn_id: str, agent_id: str) -> TurnContext | None:
        raw = await self.db(self.store.chat_begin_turn, turn_id=turn_id, agent_id=agent_id)
        if raw is None:
            return None
        await self._publish_all(raw["events"])
        if raw.get("skip"):
            return None
        return TurnContext(
            turn_id=raw["turn_id"],
            session_id=raw["session_id"],
            mode=raw["mode"],
            message=raw["message"],
            synthetic=raw["synthetic"],
            workdir=raw["workdir"],
            model_provider=raw["model_provider"],
            model_id=raw["model_id"],
            opencode_session_id=raw["opencode_session_id"],
            after_interrupt=raw["after_interrupt"],
            variables=variables_for(
                raw["raw"],
                workdir=raw["workdir"],
                mode=raw["mode"],
                system_prompt=raw["system_prompt"],
            ),
        )

    async def save_prompt(self, turn_id, prompt, skill_id, variables) -> None:
        await self.db(
            self.store.chat_save_prompt,
            turn_id=turn_id,
            prompt=prompt,
            skill_id=skill_id,
            variables=variables,
        )

    async def set_opencode_session(self, session_id, opencode_session_id) -> None:
        await self.db(
            self.store.chat_set_opencode_session,
            session_id=session_id,
            opencode_session_id=opencode_session_id,
        )

    async def emit(self, session_id, turn_id, events) -> None:
        await self._publish_all(
            await self.db(
                self.store.chat_emit, _streaming=True, session_id=session_id, events=events
            )
        )

    async def finish_turn(self, ctx: TurnContext, outcome: TurnOutcome) -> None:
        events = await self.db(
            self.store.chat_finish_turn,
            turn_id=ctx.turn_id,
            outcome={
                "status": outcome.status,
                "text": outcome.text,
                "thinking": outcome.thinking,
                "parts": outcome.parts,
                "error": outcome.error,
                "actions": outcome.actions,
                "title": outcome.title,
            },
        )
        await self._publish_all(events)

    async def start_research(self, agent_id, session_id, goal, max_iterations) -> str:
        child = await self.db(
            self.store.chat_start_research,
            agent_id=agent_id,
            session_id=session_id,
            goal=goal,
            max_iterations=max_iterations,
        )
        self._wake()  # the daemon claims the new agent at once
        return child

    async def command_child(self, session_id, target, kind, context="") -> str:
        problem = await self.db(
            self.store.chat_command_child,
            session_id=session_id,
            target=target,
            kind=kind,
            context=context,
        )
        self._wake()
        return problem

    async def child_report(self, agent_id) -> dict:
        return await self.db(self.store.chat_child_report, agent_id=agent_id)

    async def enqueue_synthetic(self, session_id, message, child_id) -> str:
        return await self.db(
            self.store.chat_enqueue_synthetic,
            session_id=session_id,
            message=message,
            child_id=child_id,
        )

    async def live_children(self, agent_id) -> list[str]:
        return await self.db(self.store.chat_live_children, agent_id=agent_id)

    def wake(self) -> None:
        self._wake()


async def dispatch_turns(daemon) -> int:
    """The daemon's chat step: every turn it streams is with its session's L1 agent, and
    every stop a person asked for reaches the turn."""
    store = daemon.store
    claimed = await daemon.db(store.chat_claim_turns, host_id=daemon.host_id)
    for turn_id, session_id in claimed:
        agent = await session_agent(daemon, session_id)
        if agent is not None:
            agent.submit_turn(turn_id)
    for turn_id, session_id in await daemon.db(store.chat_stop_requests, host_id=daemon.host_id):
        agent = await session_agent(daemon, session_id)
        if agent is not None and not agent.stop_turn(turn_id):
            agent.submit_turn(turn_id)  # not begun yet: it ends at once as stopped
    return len(claimed)


async def session_agent(daemon, session_id: str):
    """The L1 agent of a session, hosted here; launched when it is not (yet)."""
    from agentsys.agents.session import SessionAgent

    supervisor = daemon.supervisor
    for hosted in supervisor.hosted.values():
        local = hosted.local
        if (
            isinstance(local, SessionAgent)
            and local.config.get("chat_session_id") == session_id
            and not local.status.is_terminal
        ):
            return local
    found = await daemon.db(
        daemon.store.chat_session_agent, session_id=session_id, host_id=daemon.host_id
    )
    if found["event"]:
        await daemon.publish(found["event"])
    record = found["record"]
    hosted = supervisor.hosted.get(record.id)
    if hosted is None:
        await supervisor.launch(record, supervisor.registry.resolve(record.cls_path))
        hosted = supervisor.hosted[record.id]
    return hosted.local
