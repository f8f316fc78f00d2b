"""A turn after one that runagentd was killed in (its context says `after_interrupt`) reads
the OpenCode session's paid steps back and records them by their keys before it prompts
(issue 38 §1): the killed turn's steps went to the ledger with its close, never written."""

import asyncio
import dataclasses

from agentsys.agents import session as session_module
from agentsys.opencode import OpenCodeError
from tests.unit.test_session_agent import FakeClient, FakeStore, agent_with

STEPS = [{"key": "prt_lost", "usd": 0.01, "input_tokens": 10}]


class InterruptedStore(FakeStore):
    def __init__(self):
        super().__init__()
        self.recorded = []

    def begin_turn(self, *, turn_id, agent_id):
        begun = super().begin_turn(turn_id=turn_id, agent_id=agent_id)
        context = dataclasses.replace(begun.context, after_interrupt=True)
        return dataclasses.replace(begun, context=context)

    def record_session_steps(self, *, session_id, steps):
        self.recorded.append((session_id, steps))


class ReadBackClient(FakeClient):
    def __init__(self, answer="Done.", *, unreadable=False):
        super().__init__(answer)
        self.unreadable, self.calls = unreadable, []

    async def abort(self, session_id, directory=None):
        self.calls.append("abort")

    async def session_steps(self, session_id, directory=None):
        self.calls.append(("steps", session_id))
        if self.unreadable:
            raise OpenCodeError("OpenCode answered GET /session/ses_1/message with no JSON")
        return STEPS


def test_the_turn_after_a_kill_records_the_sessions_steps_before_it_prompts(monkeypatch):
    monkeypatch.setattr(session_module, "ABORT_SETTLE_S", 0)
    store, client = InterruptedStore(), ReadBackClient()
    asyncio.run(agent_with(store, client)._turn("turn-2"))
    assert client.calls == ["abort", ("steps", "ses_1")]
    assert store.recorded == [("chat-1", STEPS)]
    assert store.finished.status == "done"


def test_steps_that_cannot_be_read_back_cost_no_reply(monkeypatch):
    monkeypatch.setattr(session_module, "ABORT_SETTLE_S", 0)
    store = InterruptedStore()
    asyncio.run(agent_with(store, ReadBackClient(unreadable=True))._turn("turn-2"))
    assert store.recorded == [] and store.finished.status == "done"
