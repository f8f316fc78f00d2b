"""The L1 SessionAgent's turn logic with a fake chat store and a fake model client (no database,
no OpenCode): what each mode carries out, what the person is told, in which order events go
out, and how failures and stops end a turn. End to end: test_chat_e2e.py."""

from __future__ import annotations

import asyncio

import pytest

from agentsys.agents.session import SessionAgent
from agentsys.chat.store import BegunTurn, ChatLink, TurnContext
from agentsys.opencode import OpenCodeUnavailable
from agentsys.opencode.client import PromptResult
from agentsys.opencode.events import PartRelay, PromptAccumulator
from agentsys.types import AgentStatus


class FakeStore:
    """The chat store the agent writes to, keeping what it was told."""

    def __init__(self, mode="auto", synthetic=False):
        self.mode, self.synthetic = mode, synthetic
        self.events: list[tuple[str, dict]] = []
        self.finished = None
        self.commands, self.research = [], []

    def begin_turn(self, *, turn_id, agent_id):
        return BegunTurn(
            TurnContext(
                turn_id=turn_id,
                session_id="chat-1",
                mode=self.mode,
                message="do it",
                synthetic=self.synthetic,
                workdir="/tmp",
                model_provider="p",
                model_id="m",
                opencode_session_id="ses_1",
                variables={"workdir": "/tmp"},
            )
        )

    def save_prompt(self, **kwargs):
        pass

    def set_opencode_session(self, **kwargs):
        pass

    def emit(self, *, session_id, events):
        self.events += events
        return []

    def finish_turn(self, *, turn_id, outcome):
        self.finished = outcome
        return []

    def start_research(self, *, agent_id, session_id, goal, max_iterations, workdir=""):
        self.research.append((goal, max_iterations) + ((workdir,) if workdir else ()))
        return f"orchestrator-{len(self.research):08d}"

    def command_child(self, *, session_id, target, kind, context):
        self.commands.append((kind, target, context))
        return "" if target.startswith("orchestrator-") else f"no experiment {target!r}"


async def _call_here(fn, /, _streaming=False, **kwargs):
    """The daemon's `db`, without its thread: the fake store answers at once."""
    return fn(**kwargs)


async def _publish(event):
    pass


class FakeClient:
    def __init__(self, answer="", *, fail=None, stall=False):
        self.answer, self.fail, self.stall = answer, fail, stall

    async def prompt(self, session_id, text, *, provider, model, directory, on_part):
        on_part({"kind": "delta", "id": "p1", "ptype": "reasoning", "delta": "hmm"})
        on_part({"kind": "delta", "id": "p2", "ptype": "text", "delta": self.answer[:5]})
        if self.fail:
            raise self.fail
        if self.stall:
            await asyncio.sleep(60)
        on_part({"kind": "delta", "id": "p2", "ptype": "text", "delta": self.answer[5:]})
        return PromptResult(text=self.answer, session_id=session_id)

    async def aclose(self):
        pass


def agent_with(store, client) -> SessionAgent:
    agent = SessionAgent()
    agent.id = "orchestrator-l1"
    agent.chat = ChatLink(store=store, db=_call_here, publish=_publish, wake=lambda: None)
    agent.session_id = "chat-1"
    from agentsys.research.settings import DEFAULT_SKILLS_DIR, ResearchSettings
    from agentsys.skills import PromptSkills

    agent.skills = PromptSkills(DEFAULT_SKILLS_DIR)
    agent.settings = ResearchSettings.from_config({"opencode_url": "http://unused"})
    agent.client = client
    agent.adopt_children = lambda ids: []
    return agent


def kinds(store) -> list[str]:
    return [kind for kind, _ in store.events]


def test_a_steer_and_a_stop_are_carried_out_in_order_before_the_idle():
    answer = (
        "On it.\n<steer_child>\nexperiment_id: orchestrator-00000001\ncontext: smaller lr\n"
        "</steer_child>\n<stop_child>\nexperiment_id: executor-ffffffff\n</stop_child>"
    )
    store = FakeStore("auto")
    asyncio.run(agent_with(store, FakeClient(answer))._turn("turn-1"))
    assert store.commands == [
        ("steer", "orchestrator-00000001", "smaller lr"),
        ("stop", "executor-ffffffff", ""),
    ]
    actions = [p for k, p in store.events if k == "l1_action"]
    assert [a["action"] for a in actions] == ["steer_child", "stop_child"]
    assert actions[0]["error"] == "" and "no experiment" in actions[1]["error"]
    assert kinds(store)[0] == "provenance"
    assert store.finished.status == "done"
    assert store.finished.text.startswith("On it.") and "<steer_child>" not in store.finished.text
    assert "Not carried out: no experiment" in store.finished.text
    assert [p["type"] for p in store.finished.parts] == ["reasoning", "text"]


def test_wild_mode_starts_research_even_when_the_model_names_none():
    store = FakeStore("wild")
    asyncio.run(agent_with(store, FakeClient("Sure, I can help."))._turn("turn-1"))
    assert store.research == [("do it", None)]
    [action] = [p for k, p in store.events if k == "l1_action"]
    assert action["agent_id"] and "WILD mode expects" in action["note"]


def test_a_synthetic_wild_turn_starts_nothing_by_itself():
    store = FakeStore("wild", synthetic=True)
    asyncio.run(agent_with(store, FakeClient("Summary: it worked."))._turn("turn-1"))
    assert store.research == [] and "l1_action" not in kinds(store)


def test_agent_mode_refuses_every_action():
    store = FakeStore("agent")
    answer = "x\n<spawn_command>\ncommand: rm -rf /\n</spawn_command>"
    asyncio.run(agent_with(store, FakeClient(answer))._turn("turn-1"))
    [action] = [p for k, p in store.events if k == "l1_action"]
    assert "AGENT mode" in action["error"] and store.research == [] and store.commands == []


def test_a_model_failure_fails_the_turn_with_the_reason_and_keeps_what_came():
    store = FakeStore("auto")
    client = FakeClient("Hello world", fail=OpenCodeUnavailable("OpenCode at x cannot be reached"))
    asyncio.run(agent_with(store, client)._turn("turn-1"))
    [error] = [p for k, p in store.events if k == "error"]
    assert "cannot be reached" in error["message"]
    assert store.finished.status == "failed" and store.finished.text == "Hello"


def test_stopping_a_turn_ends_it_stopped_and_the_agent_goes_on():
    store = FakeStore("auto")
    agent = agent_with(store, FakeClient("Hello world", stall=True))

    async def scenario():
        runner = asyncio.create_task(agent.run())
        agent.submit_turn("turn-1")
        while not store.events or store.events[-1][0] != "part_delta":
            await asyncio.sleep(0.01)
        assert agent.stop_turn("turn-1")
        while store.finished is None:
            await asyncio.sleep(0.01)
        assert not runner.done()  # ready for the next turn
        runner.cancel()

    asyncio.run(scenario())
    assert store.finished.status == "stopped" and store.finished.text == "Hello"


def test_the_relay_of_parts_skips_the_prompt_and_fills_in_snapshot_only_text():
    acc, relay = PromptAccumulator("s"), PartRelay()
    events = [
        {
            "type": "message.updated",
            "properties": {"info": {"id": "u", "role": "user", "sessionID": "s"}},
        },
        {
            "type": "message.part.updated",
            "properties": {
                "part": {
                    "id": "pu",
                    "messageID": "u",
                    "sessionID": "s",
                    "type": "text",
                    "text": "PROMPT",
                }
            },
        },
        {
            "type": "message.part.updated",
            "properties": {
                "part": {
                    "id": "pa",
                    "messageID": "a",
                    "sessionID": "s",
                    "type": "text",
                    "text": "Hel",
                }
            },
        },
        {
            "type": "message.part.delta",
            "properties": {
                "sessionID": "s",
                "messageID": "a",
                "partID": "pa",
                "field": "text",
                "delta": "lo",
            },
        },
        {
            "type": "message.part.updated",
            "properties": {
                "part": {
                    "id": "pa",
                    "messageID": "a",
                    "sessionID": "s",
                    "type": "text",
                    "text": "Hello!",
                }
            },
        },
    ]
    updates = []
    for event in events:
        acc.feed(event)
        updates += relay.updates(acc, event)
    assert [u["delta"] for u in updates] == ["Hel", "lo", "!"]
    assert all(u["id"] == "pa" for u in updates)


@pytest.mark.parametrize("kind", ["steer_child", "stop_child"])
def test_a_child_command_with_a_bad_id_never_reaches_the_store(kind):
    store = FakeStore("auto")
    answer = f"<{kind}>\nexperiment_id: ; rm -rf /\ncontext: x\n</{kind}>"
    asyncio.run(agent_with(store, FakeClient(answer))._turn("turn-1"))
    assert store.commands == []


def test_a_paused_session_agent_holds_the_next_turn_and_the_actions_of_an_answer():
    """Paused, the chat's L1 starts no turn and carries out no action (a research loop it
    would spawn) until it is resumed; then both happen, once."""
    store = FakeStore("wild")
    agent = agent_with(store, FakeClient("Sure, I can help."))

    class Link:
        def status_changed(self, agent, status):
            pass

        def emit(self, agent, kind, payload):
            pass

    agent._link = Link()
    agent.status = AgentStatus.RUNNING

    async def scenario():
        runner = asyncio.create_task(agent.run())
        await agent.pause()
        agent.submit_turn("turn-1")
        await asyncio.sleep(0.1)
        assert store.events == [] and store.research == []  # the turn has not begun
        await agent.resume()
        while store.finished is None:
            await asyncio.sleep(0.01)
        runner.cancel()

    asyncio.run(scenario())
    assert store.research == [("do it", None)] and store.finished.status == "done"
