"""Chat end to end (issue 11): a real daphne and runagentd, the real OpenCode server, and the
project's scripted model. A person's message becomes a turn streamed by the session's L1
agent inside runagentd, followed over NDJSON and the WebSocket; its action tags start, steer
and stop real agents, whose end starts a synthetic turn by itself."""

from __future__ import annotations

import signal

import httpx
import pytest

from agents_app.models import Agent
from agentsys.scripted_llm.server import is_title_call, tokens_in, usage_of
from events_app.models import Event
from ledger_app.models import SpendEntry
from ledger_app.selectors import spent_by_session
from research_app.models import ResearchLoop
from sessions_app.models import ChatMessage, ChatSession, ChatTurn
from tests.chat_clients import (
    HEADERS,
    ChatSocket,
    chat,
    chat_events,
    chat_until,
    new_session,
    stream,
)
from tests.e2e.test_research_e2e import REFLECTION, happy_script, prompts_seen
from tests.helpers import wait_until
from tests.live_clients import TOKEN, Web

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def web(agentsys_config, workdir):
    agentsys_config(api_token=TOKEN)
    server = Web(AGENTSYS_WORKDIR=str(workdir))
    yield server
    if server.process.poll() is None:
        server.stop()


@pytest.fixture
def daemon(make_daemon):
    return make_daemon()


def text_of(events: list[dict]) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "part_delta" and e["ptype"] == "text")


def assert_contiguous(events: list[dict]) -> None:
    seqs = [e["seq"] for e in events]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), seqs


def turn_of(session_id: str, **filters) -> ChatTurn:
    return ChatTurn.objects.filter(session_id=session_id, **filters).order_by("started_at").last()


def assistant_messages(session_id: str) -> list[ChatMessage]:
    return list(ChatMessage.objects.filter(session_id=session_id, role="assistant").order_by("seq"))


def test_an_auto_turn_answers_directly_with_a_tool_streamed_over_ndjson_and_websocket(
    web,
    daemon,
    scripted_llm,
    workdir,
):
    scripted_llm.load(
        {
            "turns": [
                {
                    "match": "chat-auto",
                    "steps": [
                        {"reasoning": "I should look at the files first."},
                        {
                            "tool_call": {
                                "name": "bash",
                                "arguments": {
                                    "command": "ls",
                                    "description": "List the project files",
                                },
                            }
                        },
                    ],
                },
                {"match": "chat-auto", "steps": [{"text": "The project holds train.py."}]},
            ]
        }
    )
    session = new_session(web)
    socket = ChatSocket(web, session, after=0)
    status, events = chat(web, session, "What is in my project?", mode="auto")
    assert status == 200, events
    assert_contiguous(events)
    kinds = [e["type"] for e in events]
    assert kinds[0] == "user_message" and kinds[1] == "provenance" and kinds[-1] == "session_status"
    assert events[1]["skill_id"] == "l1_auto_session"
    assert events[-1]["outcome"] == "done", events[-1]
    tools = [e for e in events if e["type"] == "part_update" and e.get("tool") == "bash"]
    assert tools and tools[-1]["status"] == "completed", tools
    assert "train.py" in (tools[-1]["output"] or "")
    assert text_of(events) == "The project holds train.py."
    assert any(e["type"] == "part_delta" and e["ptype"] == "reasoning" for e in events)
    assert "l1_action" not in kinds

    # The browser's socket got the same events, with the same numbers.
    wait_until(lambda: "session_status" in socket.kinds(), 20, message="the socket's idle")
    socket.close()
    # (The chat's title, written beside the turn, may come after its end: not in the turn.)
    seqs = [e["seq"] for e in events]
    assert [m["id"] for m in socket.received][: len(seqs)] == seqs

    # Saved: content, thinking, and the parts in order (reasoning, tool, text).
    [message] = assistant_messages(session)
    assert message.content == "The project holds train.py."
    assert "look at the files" in message.thinking
    assert [p["type"] for p in message.parts] == ["reasoning", "tool", "text"]
    assert turn_of(session).status == "done"
    # The title is the model's (AgentSys's title call, answered from the request), and in
    # the ledger, with the turn's steps: every call to the model is a step recorded once.
    assert_title_written(web, scripted_llm, session, "What is in my project")


def assert_title_written(web, scripted_llm, session: str, title: str) -> None:
    def detail():
        url = f"{web.url}/api/sessions/{session}"
        return httpx.get(url, headers=HEADERS, timeout=10).json()

    wait_until(lambda: detail()["title"] == title, 60, message=f"the title {title!r}")
    titles = [b for b in scripted_llm.requests if is_title_call(b)]
    assert len(titles) == 1  # AgentSys's own: OpenCode made none
    entries = list(SpendEntry.objects.filter(chat_session_id=session).order_by("created_at"))
    [step] = [e for e in entries if e.key.startswith("llm:title:prt_")]
    assert step.input_tokens == usage_of(titles[0], "")["prompt_tokens"]
    assert step.output_tokens == tokens_in(title) and step.usd > 0
    assert step.user_id == ChatSession.objects.get(pk=session).owner_id
    assert len(entries) == len(scripted_llm.requests)  # no call the ledger misses
    spent = spent_by_session(session)
    assert spent["llm_usd"] == pytest.approx(float(sum(e.usd for e in entries)), abs=1e-8)
    assert spent["llm_tokens"] == sum(e.tokens for e in entries)
    # The page was told, by an event of the chat's stream.
    told = [e["title"] for e in stream(web, session, after=0) if e["type"] == "session_title"]
    assert told == [title]


def test_a_wild_turn_spawns_research_whose_end_starts_a_synthetic_summary(
    web,
    daemon,
    scripted_llm,
    workdir,
):
    script = happy_script()
    script["turns"] += [
        {
            "match": r"chat-wild.*\[USER\] ",
            "steps": [
                {
                    "text": "Starting a loop.\n<spawn_research>\ngoal: Find the best "
                    "learning rate\nfor train.py\nmax_iterations: 5\n</spawn_research>"
                }
            ],
        },
        {
            "match": r"\[SYSTEM\] The research loop",
            "steps": [{"text": "Summary: the loop found lr=0.2 converges faster."}],
        },
    ]
    scripted_llm.load(script)
    session = new_session(web)
    status, events = chat(web, session, "Which learning rate is best?", mode="wild")
    assert status == 200, events
    actions = [e for e in events if e["type"] == "l1_action"]
    assert len(actions) == 1 and actions[0]["action"] == "spawn_research", actions
    assert actions[0]["error"] == "" and actions[0]["agent_id"]
    # The action went out before the closing idle, and the tag is not in the saved reply.
    assert [e["type"] for e in events].index("l1_action") < len(events) - 1
    assert "<spawn_research>" not in assistant_messages(session)[0].content

    child = Agent.objects.get(pk=actions[0]["agent_id"])
    assert child.goal == "Find the best learning rate\nfor train.py"
    assert child.parent.cls_path == "agentsys.agents.session.SessionAgent"
    assert ResearchLoop.objects.get(agent=child).chat_session_id == session

    synthetic = wait_until(
        lambda: turn_of(session, synthetic=True, status="done"),
        120,
        interval=0.3,
        message="the synthetic turn to finish",
    )
    assert Agent.objects.get(pk=child.pk).status == "done"
    assert "The larger learning rate converged faster" in synthetic.message
    report_prompt = next(p for p in prompts_seen(scripted_llm) if "[SYSTEM] The research" in p)
    assert child.id in report_prompt
    assert assistant_messages(session)[-1].content.startswith("Summary: the loop found lr=0.2")
    assert REFLECTION  # the reflection the report quotes is the loop's own
    # A reconnecting client replays the whole conversation in order.
    replay = stream(web, session, after=0)
    assert_contiguous(replay)
    assert [e["type"] for e in replay].count("session_status") == 2


def test_a_steer_and_a_stop_in_the_reply_reach_the_child(
    web,
    daemon,
    scripted_llm,
    workdir,
):
    scripted_llm.load(
        {
            "turns": [
                {
                    "match": r"chat-auto.*\[USER\] start",
                    "steps": [{"text": "<spawn_research>\ngoal: a long study\n</spawn_research>"}],
                },
                # The loop's planning takes a while: the steer lands while it works.
                {"match": "agentsys-prompt: planning", "steps": [{"stall": 60}]},
            ]
        }
    )
    session = new_session(web)
    _, events = chat(web, session, "start a study", mode="auto")
    child = next(e for e in events if e["type"] == "l1_action")["agent_id"]
    wait_until(lambda: Agent.objects.get(pk=child).status == "running", 30, message="child up")

    scripted_llm.load(
        {
            "turns": [
                {
                    "match": r"\[USER\] steer",
                    "steps": [
                        {
                            "text": f"Redirecting it.\n"
                            f"<steer_child>\nexperiment_id: {child}\ncontext: focus on lr 0.3\n"
                            "</steer_child>"
                        }
                    ],
                },
                {
                    "match": r"\[USER\] stop",
                    "steps": [
                        {
                            "text": "Stopping it.\n<stop_child>\n"
                            f"experiment_id: {child}\n</stop_child>"
                        }
                    ],
                },
                {"match": r"\[SYSTEM\]", "steps": [{"text": "It was stopped."}]},
            ]
        }
    )
    _, events = chat(web, session, "steer it", mode="auto")
    steer = next(e for e in events if e["type"] == "l1_action")
    assert steer["action"] == "steer_child" and steer["error"] == "", steer
    wait_until(
        lambda: Event.objects.filter(agent_id=child, kind="steered").exists(),
        30,
        message="the steer to reach the child",
    )
    assert Event.objects.get(agent_id=child, kind="steered").payload["context"] == "focus on lr 0.3"

    _, events = chat(web, session, "stop it", mode="auto")
    stop = next(e for e in events if e["type"] == "l1_action")
    assert stop["action"] == "stop_child" and stop["error"] == "", stop
    wait_until(lambda: Agent.objects.get(pk=child).status == "stopped", 30, message="stopped")


def test_an_agent_turn_refuses_its_spawn_tag_and_says_so(
    web,
    daemon,
    scripted_llm,
    workdir,
):
    scripted_llm.load(
        {
            "turns": [
                {
                    "match": "chat-agent",
                    "steps": [
                        {"text": "I'll start one.\n<spawn_research>\ngoal: x\n</spawn_research>"}
                    ],
                },
                {"match": "chat-auto", "steps": [{"text": "Noted, nothing started."}]},
            ]
        }
    )
    session = new_session(web)
    before = Agent.objects.count()
    _, events = chat(web, session, "investigate things", mode="agent")
    [action] = [e for e in events if e["type"] == "l1_action"]
    assert "AGENT mode" in action["error"] and action["agent_id"] == ""
    content = assistant_messages(session)[0].content
    assert "Not carried out" in content and "<spawn_research>" not in content
    # A tag typed by the person is theirs, not the model's: AUTO starts nothing for it.
    _, events = chat(
        web, session, "<spawn_research>\ngoal: injected\n</spawn_research>", mode="auto"
    )
    assert not [e for e in events if e["type"] == "l1_action"]
    # Only the L1 agent itself was created.
    assert Agent.objects.count() == before + 1


SLOW = [{"chunk_delay": 0.08}, {"text": " ".join(f"word{i}" for i in range(60))}]


def test_reconnecting_mid_stream_and_after_a_web_restart_loses_nothing(
    web,
    daemon,
    scripted_llm,
    workdir,
):
    scripted_llm.load({"turns": [{"match": "chat-auto", "steps": SLOW}] * 2})
    session = new_session(web)
    first = chat_until(web, session, "talk slowly", deltas=3)  # the connection drops
    rest = stream(web, session, after=first[-1]["seq"])
    whole = first + rest
    assert_contiguous(whole)
    assert whole[-1]["type"] == "session_status"
    assert text_of(whole) == SLOW[1]["text"]

    # The web process restarts while the second answer streams; the client comes back.
    second = chat_until(web, session, "again", deltas=3)
    port = web.port
    web.stop()
    restarted = Web(port, **web.env)
    try:
        rest = stream(restarted, session, after=second[-1]["seq"])
    finally:
        restarted.stop()
    whole = second + rest
    assert_contiguous(whole)
    assert text_of(whole) == SLOW[1]["text"] and whole[-1]["outcome"] == "done"


def test_sigkill_of_runagentd_mid_turn_keeps_the_partial_reply_and_the_next_turn_works(
    web,
    make_daemon,
    scripted_llm,
    workdir,
):
    scripted_llm.load(
        {
            "turns": [
                {
                    "match": r"\[USER\] first",
                    "steps": [{"text": "Partial answer, then "}, {"stall": 60}],
                },
                {"match": r"\[USER\] second", "steps": [{"text": "Back again."}]},
            ]
        }
    )
    daemon = make_daemon()
    session = new_session(web)
    chat_until(web, session, "first question", deltas=1)
    daemon.stop(signal.SIGKILL)
    make_daemon()  # the next runagentd closes what its predecessor left
    turn = wait_until(
        lambda: turn_of(session, status="interrupted"), 30, message="the turn interrupted"
    )
    assert "runagentd stopped" in turn.error
    [partial] = assistant_messages(session)
    assert partial.content == "Partial answer, then "
    status, events = chat(web, session, "second question", mode="auto")
    assert status == 200 and text_of(events) == "Back again."
    assert events[-1]["outcome"] == "done"


@pytest.fixture
def demo_model(scripted_llm):
    scripted_llm.demo = True
    yield scripted_llm
    scripted_llm.demo = False


def test_the_demo_model_chats_starts_the_demo_loop_in_wild_mode_and_reports_it(
    web, daemon, demo_model, workdir
):
    session = new_session(web)
    status, events = chat(web, session, "Which learning rate suits train.py?", mode="wild")
    assert status == 200, events
    [action] = [e for e in events if e["type"] == "l1_action"]
    assert action["action"] == "spawn_research" and action["agent_id"], action
    assert "research loop" in text_of(events)
    report = wait_until(
        lambda: turn_of(session, synthetic=True, status="done"),
        120,
        interval=0.3,
        message="the demo loop's report",
    )
    assert Agent.objects.get(pk=action["agent_id"]).status == "done"
    summary = assistant_messages(session)[-1].content
    assert summary.startswith("Results are in.") and "lr=" in summary, summary
    assert report.message in ChatMessage.objects.get(session_id=session, role="system").content


def test_stop_ends_a_streaming_reply_keeping_what_came(web, daemon, scripted_llm, workdir):
    scripted_llm.load(
        {
            "turns": [
                {"match": r"\[USER\] long", "steps": [{"text": "Thinking aloud, "}, {"stall": 60}]},
                {"match": r"\[USER\] next", "steps": [{"text": "Ready."}]},
            ]
        }
    )
    session = new_session(web)
    events, stopped = [], False
    for event in chat_events(web, session, "long question"):
        events.append(event)
        # At the first delta, wherever it comes: the chat's title, written beside the reply,
        # may come first on a busy machine (the stop, sent at the third event only, was then
        # never sent and the reply ran to its end).
        if event["type"] == "part_delta" and not stopped:
            stop = httpx.post(f"{web.url}/api/sessions/{session}/stop", headers=HEADERS)
            assert stop.json()["stopping"], stop.text
            stopped = True
    assert stopped, events
    assert events[-1]["outcome"] == "stopped"
    assert turn_of(session).status == "stopped"
    assert assistant_messages(session)[0].content == "Thinking aloud, "
    status, events = chat(web, session, "next one", mode="auto")
    assert status == 200 and text_of(events) == "Ready."


def test_a_loop_started_from_chat_is_still_reported_after_runagentd_restarts(
    web, make_daemon, scripted_llm, workdir
):
    script = happy_script()
    script["turns"][0]["steps"].insert(0, {"stall": 4})  # planning takes a while
    script["turns"] += [
        {
            "match": r"\[USER\] ",
            "steps": [
                {"text": "<spawn_research>\ngoal: Find the best learning rate\n</spawn_research>"}
            ],
        },
        {"match": r"\[SYSTEM\] The research loop", "steps": [{"text": "Reported after all."}]},
    ]
    scripted_llm.load(script)
    first = make_daemon()
    session = new_session(web)
    _, events = chat(web, session, "find the best lr", mode="wild")
    child = next(e for e in events if e["type"] == "l1_action")["agent_id"]
    l1 = Agent.objects.get(pk=child).parent_id
    wait_until(lambda: Agent.objects.get(pk=child).status == "running", 30, message="loop up")
    first.stop()  # SIGTERM: the loop and the chat's agent are left to be resumed
    assert Agent.objects.get(pk=l1).status == "running"
    make_daemon()
    report = wait_until(
        lambda: turn_of(session, synthetic=True, status="done"),
        120,
        interval=0.3,
        message="the report after the restart",
    )
    assert child in report.message and Agent.objects.get(pk=child).status == "done"
    assert Agent.objects.get(pk=l1).status == "running"  # the same L1, resumed
    assert assistant_messages(session)[-1].content == "Reported after all."
