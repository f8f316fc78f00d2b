"""The L1 SessionAgent's turn logic with a fake port and a fake model client (no database,
no OpenCode): what each mode carries out, what the person is told, in which order events go
out, and how failures and stops end a turn. End to end: test_chat_e2e.py."""

from __future__ import annotations

import asyncio

import pytest

from agentsys.agents.session import SessionAgent
from agentsys.chat.port import TurnContext
from agentsys.opencode import OpenCodeUnavailable
from agentsys.opencode.client import PromptResult
from agentsys.opencode.events import PartRelay, PromptAccumulator
from agentsys.types import AgentStatus


class FakePort:
    def __init__(self, mode="auto", synthetic=False):
        self.mode, self.synthetic = mode, synthetic
        self.events: list[tuple[str, dict]] = []
        self.finished = None
        self.commands, self.research = [], []

    async def begin_turn(self, turn_id, agent_id):
        return TurnContext(
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

    async def save_prompt(self, *args):
        pass

    async def set_opencode_session(self, *args):
        pass

    async def emit(self, session_id, turn_id, events):
        self.events += events

    async def finish_turn(self, ctx, outcome):
        self.finished = outcome

    async def start_research(self, agent_id, session_id, goal, max_iterations):
        self.research.append((goal, max_iterations))
        return f"orchestrator-{len(self.research):08d}"

    async def command_child(self, session_id, target, kind, context=""):
        self.commands.append((kind, target, context))
        return "" if target.startswith("orchestrator-") else f"no experiment {target!r}"

    def wake(self):
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


def agent_with(port, client) -> SessionAgent:
    agent = SessionAgent()
    agent.id, agent.port = "orchestrator-l1", port
    agent.session_id = "chat-1"
    from agentsys.research.settings import DEFAULT_SKILLS_DIR, ResearchSettings
    from agentsys.skills import PromptSkills

    agent.skills = PromptSkills(DEFAULT_SKILLS_DIR)
    agent.settings = ResearchSettings.from_config({"opencode_url": "http://unused"})
    agent.client = client
    agent.adopt_children = lambda ids: []
    return agent


def kinds(port) -> list[str]:
    return [kind for kind, _ in port.events]


def test_a_steer_and_a_stop_are_carried_out_in_order_before_the_idle():
    answer = (
        "On it.\n<steer_child>\nexperiment_id: orchestrator-00000001\ncontext: smaller lr\n"
        "</steer_child>\n<stop_child>\nexperiment_id: executor-ffffffff\n</stop_child>"
    )
    port = FakePort("auto")
    asyncio.run(agent_with(port, FakeClient(answer))._turn("turn-1"))
    assert port.commands == [
        ("steer", "orchestrator-00000001", "smaller lr"),
        ("stop", "executor-ffffffff", ""),
    ]
    actions = [p for k, p in port.events if k == "l1_action"]
    assert [a["action"] for a in actions] == ["steer_child", "stop_child"]
    assert actions[0]["error"] == "" and "no experiment" in actions[1]["error"]
    assert kinds(port)[0] == "provenance"
    assert port.finished.status == "done"
    assert port.finished.text.startswith("On it.") and "<steer_child>" not in port.finished.text
    assert "Not carried out: no experiment" in port.finished.text
    assert [p["type"] for p in port.finished.parts] == ["reasoning", "text"]


def test_wild_mode_starts_research_even_when_the_model_names_none():
    port = FakePort("wild")
    asyncio.run(agent_with(port, FakeClient("Sure, I can help."))._turn("turn-1"))
    assert port.research == [("do it", None)]
    [action] = [p for k, p in port.events if k == "l1_action"]
    assert action["agent_id"] and "WILD mode expects" in action["note"]


def test_a_synthetic_wild_turn_starts_nothing_by_itself():
    port = FakePort("wild", synthetic=True)
    asyncio.run(agent_with(port, FakeClient("Summary: it worked."))._turn("turn-1"))
    assert port.research == [] and "l1_action" not in kinds(port)


def test_agent_mode_refuses_every_action():
    port = FakePort("agent")
    answer = "x\n<spawn_command>\ncommand: rm -rf /\n</spawn_command>"
    asyncio.run(agent_with(port, FakeClient(answer))._turn("turn-1"))
    [action] = [p for k, p in port.events if k == "l1_action"]
    assert "AGENT mode" in action["error"] and port.research == [] and port.commands == []


def test_a_model_failure_fails_the_turn_with_the_reason_and_keeps_what_came():
    port = FakePort("auto")
    client = FakeClient("Hello world", fail=OpenCodeUnavailable("OpenCode at x cannot be reached"))
    asyncio.run(agent_with(port, client)._turn("turn-1"))
    [error] = [p for k, p in port.events if k == "error"]
    assert "cannot be reached" in error["message"]
    assert port.finished.status == "failed" and port.finished.text == "Hello"


def test_stopping_a_turn_ends_it_stopped_and_the_agent_goes_on():
    port = FakePort("auto")
    agent = agent_with(port, FakeClient("Hello world", stall=True))

    async def scenario():
        runner = asyncio.create_task(agent.run())
        agent.submit_turn("turn-1")
        while not port.events or port.events[-1][0] != "part_delta":
            await asyncio.sleep(0.01)
        assert agent.stop_turn("turn-1")
        while port.finished is None:
            await asyncio.sleep(0.01)
        assert not runner.done()  # ready for the next turn
        runner.cancel()

    asyncio.run(scenario())
    assert port.finished.status == "stopped" and port.finished.text == "Hello"


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
def test_a_child_command_with_a_bad_id_never_reaches_the_port(kind):
    port = FakePort("auto")
    answer = f"<{kind}>\nexperiment_id: ; rm -rf /\ncontext: x\n</{kind}>"
    asyncio.run(agent_with(port, FakeClient(answer))._turn("turn-1"))
    assert port.commands == []


def test_a_paused_session_agent_holds_the_next_turn_and_the_actions_of_an_answer():
    """Paused, the chat's L1 starts no turn and carries out no action (a research loop it
    would spawn) until it is resumed; then both happen, once."""
    port = FakePort("wild")
    agent = agent_with(port, FakeClient("Sure, I can help."))

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
        assert port.events == [] and port.research == []  # the turn has not begun
        await agent.resume()
        while port.finished is None:
            await asyncio.sleep(0.01)
        runner.cancel()

    asyncio.run(scenario())
    assert port.research == [("do it", None)] and port.finished.status == "done"
