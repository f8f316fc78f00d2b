"""The daemon's chat step: claiming the turns the web stored, handing each to its session's
L1 agent (started on demand), and passing on stop requests. Store calls run on the daemon's
database thread (waiting out an outage); every event they record is published from here."""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class TurnTaker(Protocol):
    """What the chat step needs of a session's L1 agent (agentsys.agents.session's
    SessionAgent), known by what it does rather than by its class: the runtime names no
    agent class."""

    config: dict

    def submit_turn(self, turn_id: str) -> None: ...
    def stop_turn(self, turn_id: str) -> bool: ...  # False: it had not begun


async def dispatch_turns(daemon) -> int:
    """The daemon's chat step: every turn it streams is with its session's L1 agent, and
    every stop a person asked for reaches the turn."""
    store = daemon.chat_store
    claimed = await daemon.db(store.claim_turns, host_id=daemon.host_id)
    for turn_id, session_id in claimed:
        agent = await session_agent(daemon, session_id)
        if agent is not None:
            agent.submit_turn(turn_id)
    for turn_id, session_id in await daemon.db(store.stop_requests, host_id=daemon.host_id):
        agent = await session_agent(daemon, session_id)
        if agent is not None and not agent.stop_turn(turn_id):
            agent.submit_turn(turn_id)  # not begun yet: it ends at once as stopped
    return len(claimed)


async def session_agent(daemon, session_id: str) -> TurnTaker | None:
    """The L1 agent of a session, hosted here; launched when it is not (yet)."""
    supervisor = daemon.supervisor
    for hosted in supervisor.hosted.values():
        local = hosted.local
        if (
            isinstance(local, TurnTaker)
            and local.config.get("chat_session_id") == session_id
            and not local.status.is_terminal
        ):
            return local
    found = await daemon.db(
        daemon.chat_store.session_agent, session_id=session_id, host_id=daemon.host_id
    )
    if found["event"]:
        await daemon.publish(found["event"])
    record = found["record"]
    hosted = supervisor.hosted.get(record.id)
    if hosted is None:
        await supervisor.launch(record, supervisor.registry.resolve(record.cls_path))
        hosted = supervisor.hosted[record.id]
    return hosted.local
