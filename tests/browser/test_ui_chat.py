"""Chat and the agents tree in Chromium (issue 12 items 3 and 4), against the real stack: a
real daphne and runagentd, the real OpenCode server and the project's scripted model. A person
starts a chat and sees the reply grow in place; the research loop it spawns appears in the
tree live; a killed WebSocket heals with no text missing; stopping the loop from the tree
shows in the tree."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from agents_app.models import Agent
from sessions_app.models import ChatMessage, ChatSession
from tests.chromium import chat_ready, screenshot
from tests.helpers import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
OPENING = "Starting a research loop on the learning rate. " * 10  # 20 chunks of 24 chars
GOAL = "Find the best learning rate for train.py"


def _script() -> dict:
    """A wild reply that streams slowly and spawns a loop whose planning never ends by
    itself (the test stops it), then the report of that stopped loop."""
    return {
        "turns": [
            {
                "match": r"chat-wild.*\[USER\] ",
                "steps": [
                    {"chunk_delay": 0.25},
                    # The attribute form (issue 35): taken out of the text as it streams.
                    {"text": OPENING + f'\n<spawn_research goal="{GOAL}" max_iterations="5"/>'},
                ],
            },
            {"match": r"agentsys-prompt: planning", "steps": [{"stall": 120}]},
            {"match": r"\[SYSTEM\] The research loop", "steps": [{"text": "It was stopped."}]},
        ]
    }


def test_a_chat_streams_in_place_spawns_a_loop_seen_live_in_the_tree_and_heals(
    site_in_workdir, make_daemon, scripted_llm
):
    url, context, page = site_in_workdir
    scripted_llm.load(_script())
    make_daemon()
    tree = context.new_page()  # a second tab: the agents page, open before anything starts
    tree.goto(f"{url}/agents/")

    page.goto(f"{url}/chat/")
    page.get_by_role("button", name="New chat").click()
    chat_ready(page)
    page.get_by_label("wild").check()
    page.get_by_role("textbox", name="Message").fill("Which learning rate is best?")
    page.keyboard.press("Enter")
    expect(page.locator("article.msg.user")).to_contain_text("Which learning rate is best?")

    # The reply grows in one element, token by token.
    reply = page.locator("article.msg.assistant.streamed .text").first
    page.wait_for_function(
        "() => (document.querySelector('article.msg.assistant.streamed .text')?.textContent"
        " || '').length > 40"
    )
    first = len(reply.text_content())
    page.wait_for_function(
        "n => (document.querySelector('article.msg.assistant.streamed .text')?.textContent"
        " || '').length > n",
        arg=first,
    )
    # The pill says so while the reply streams, not only once it ended.
    expect(page.locator("#chat-status")).to_have_class(re.compile(r"\brunning\b"))
    # Kill the socket mid-reply: it reconnects after the last event it saw.
    streaming = page.evaluate(
        "() => { window.AgentSysChat.socket.close();"
        " return !document.getElementById('stop').hidden; }"
    )
    assert streaming, "the reply ended before the socket was killed: nothing was tested"
    card = page.locator(".action-card")
    expect(card).to_contain_text("Started a research loop", timeout=30_000)
    expect(card.locator(".loop-progress")).to_contain_text("iterations done")
    expect(page.locator("#stop")).to_be_hidden(timeout=30_000)
    assert page.evaluate("() => window.AgentSysChat.drops") >= 1
    session = ChatSession.objects.get()
    assert session.title != "New chat"  # named after the first message, tab included
    expect(page).to_have_title(f"{session.title} · Chat · AgentSys")
    saved = ChatMessage.objects.get(session=session, role="assistant")
    assert reply.text_content().strip() == saved.content.strip() == OPENING.strip()
    assert "<spawn_research" not in reply.text_content()
    screenshot(page, "chat")
    page.set_viewport_size({"width": 390, "height": 844})
    screenshot(page, "chat-phone")
    page.set_viewport_size({"width": 1280, "height": 900})

    child = Agent.objects.get(goal=GOAL)
    node = tree.locator(f"#agent-{child.id}")
    expect(node).to_be_visible()  # appeared without a reload
    expect(node.locator(".pill.status").first).to_have_text("running")
    screenshot(tree, "agents")
    tree.once("dialog", lambda dialog: dialog.accept())
    node.get_by_role("button", name=f"Stop {child.id}").click()
    expect(tree.locator(f"#agent-{child.id} .pill.status").first).to_have_text(
        "stopped", timeout=30_000
    )
    wait_until(lambda: Agent.objects.get(pk=child.pk).status == "stopped", 10)
    # Its end reaches the chat by itself, as a synthetic turn.
    # A line and a link for the person; the report itself is the agent's to read.
    ended = page.locator("article.msg.system")
    expect(ended).to_have_text(
        f"The research loop “{GOAL}” ended: stopped. See the loop", timeout=60_000
    )
    expect(ended.get_by_role("link")).to_have_attribute("href", f"/research/{child.id}/")
    expect(page.locator("article.msg.assistant").last).to_contain_text("It was stopped.")
    # The words show while that turn still streams; the chat's agent works until it ends.
    expect(page.locator("#stop")).to_be_hidden(timeout=30_000)
    # Long after the stop (and the tree's live re-renders), the stopped tree is still shown;
    # a reload is the plain page, without it.
    expect(tree.locator(f"#agent-{child.id} .pill.status").first).to_have_text("stopped")
    assert tree.url == f"{url}/agents/#agent-{child.id}"
    tree.reload()
    expect(tree.locator("#forest")).to_contain_text("No agent at work")
    tree.goto(f"{url}/research/{child.id}/")
    expect(tree.locator("#loop-status")).to_have_text("stopped")
    screenshot(tree, "research-loop")


def test_a_chat_with_a_thousand_messages_opens(site_in_workdir):
    url, _, page = site_in_workdir
    session = ChatSession.objects.create(title="Long", owner=get_user_model().objects.get())
    ChatMessage.objects.bulk_create(
        ChatMessage(
            session=session, seq=i + 1, role="user" if i % 2 else "assistant", content=f"m{i}"
        )
        for i in range(1000)
    )
    page.goto(f"{url}/chat/{session.pk}/")
    expect(page.locator("article.msg")).to_have_count(1000)
    expect(page.locator("article.msg").last).to_be_in_viewport()  # opened at the bottom


def test_a_page_logged_out_meanwhile_says_so_and_stops_reconnecting(site_in_workdir):
    """A socket refused with 4401 (the login is gone) cannot heal by retrying: the badge says
    why and the page stops knocking."""
    from django.contrib.sessions.models import Session

    url, _, page = site_in_workdir
    page.goto(f"{url}/chat/")
    page.get_by_role("button", name="New chat").click()
    chat_ready(page)
    expect(page.locator("#live-state")).to_have_text("live")
    Session.objects.all().delete()  # logged out elsewhere (or the session expired)
    page.evaluate("() => window.AgentSysChat.socket.close()")
    expect(page.locator("#live-state")).to_have_text("logged out: reload to log in")
    page.wait_for_timeout(1500)  # several reconnect delays: none is tried
    assert page.evaluate("() => window.AgentSysLive.followers.size") == 0
    assert page.evaluate("() => window.AgentSysChat.drops") == 1  # the close above, only
