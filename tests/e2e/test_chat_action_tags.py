"""The chat's action tags as real models write them (issue 35 item 5), through the real
OpenCode, runagentd and the scripted model: attribute and JSON forms start the loop the model
asked for, and an unknown tag's note reaches every place a person reads the reply (the saved
reply the API returns, the chat page, `manage.py chat`)."""

from __future__ import annotations

from io import StringIO

import httpx
import pytest
from django.core.management import call_command

from research_app.models import ResearchLoop
from sessions_app.models import ChatSession
from tests.chat_clients import HEADERS, chat, new_session
from tests.live_clients import TOKEN, Web

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

# The loops these replies start plan for as long as the test lasts: only their start counts.
PLANNING = {"match": "agentsys-prompt: planning", "steps": [{"stall": 60}]}
KNOWN_TAGS = "<spawn_research>, <spawn_command>, <steer_child>, <stop_child>"


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


def started_loop(events: list[dict]) -> tuple[dict, ResearchLoop]:
    [action] = [e for e in events if e["type"] == "l1_action"]
    assert action["action"] == "spawn_research" and action["agent_id"], action
    return action, ResearchLoop.objects.get(agent_id=action["agent_id"])


def test_attribute_and_json_spawns_start_the_loop_the_model_asked_for(
    web, daemon, scripted_llm, workdir
):
    attribute = (
        "I will hand this to a research loop.\n"
        '<spawn_research goal="Find the best learning rate for train.py" max_iterations="5"/>'
    )
    json_body = (
        "Starting a second study.\n<spawn_research>\n"
        '{"goal": "Compare batch sizes 32 and 64", "max_iterations": 4}\n</spawn_research>'
    )
    scripted_llm.load(
        {
            "turns": [
                PLANNING,
                {"match": r"chat-wild.*\[USER\] Which learning", "steps": [{"text": attribute}]},
                {"match": r"chat-wild.*\[USER\] And the batch", "steps": [{"text": json_body}]},
            ]
        }
    )
    session = new_session(web)
    _, events = chat(web, session, "Which learning rate is best?", mode="wild")
    action, loop = started_loop(events)
    assert action["goal"] == "Find the best learning rate for train.py" and not action["note"]
    assert (loop.goal, loop.settings["max_iterations"]) == (action["goal"], 5)

    _, events = chat(web, session, "And the batch size?", mode="wild")
    action, loop = started_loop(events)
    assert action["goal"] == "Compare batch sizes 32 and 64" and not action["note"]
    assert loop.settings["max_iterations"] == 4


def test_an_unknown_tag_is_noted_in_manage_py_chat_the_saved_reply_and_the_page(
    web, daemon, scripted_llm, workdir, browser
):
    reply = (
        "On it.\n<start_research>\ngoal: Find the best learning rate\nmax_iterations: 3\n"
        "</start_research>"
    )
    scripted_llm.load(
        {"turns": [PLANNING, {"match": r"chat-wild.*\[USER\] ", "steps": [{"text": reply}]}]}
    )
    out = StringIO()
    call_command("chat", "Which learning rate is best?", "--mode", "wild", stdout=out)
    printed = out.getvalue()
    not_known = "<start_research> is not an action tag"
    assert f"→ Not carried out: {not_known}" in printed and KNOWN_TAGS in printed, printed
    assert "Note: WILD mode expects a research loop" in printed
    assert "goal it gave in <start_research>" in printed
    # WILD's loop has the model's goal and iterations, not the person's message.
    session = ChatSession.objects.get()
    loop = ResearchLoop.objects.get(chat_session_id=session.pk)
    assert (loop.goal, loop.settings["max_iterations"]) == ("Find the best learning rate", 3)

    # The saved reply holds both notes: the API returns them, a reload shows them.
    detail = httpx.get(f"{web.url}/api/sessions/{session.pk}", headers=HEADERS, timeout=10)
    [saved] = [m["content"] for m in detail.json()["messages"] if m["role"] == "assistant"]
    assert f"_Not carried out: {not_known}" in saved and KNOWN_TAGS in saved, saved
    assert "_Note: WILD mode expects a research loop" in saved
    page = browser.get(f"/chat/{session.pk}/").content.decode()
    assert "Unknown action tag &lt;start_research&gt;" in page
    assert 'class="action-note small">Note: WILD mode expects a research loop' in page
    assert page.count("WILD mode expects") == 1  # on its card, not again in the text above
