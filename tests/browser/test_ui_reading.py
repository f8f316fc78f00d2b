"""What a person reads and types on the chat and research pages, in Chromium against a real
daphne (issue 18 item 4): replies as markdown with their HTML escaped, the end of a research
loop as one line with a link, a composer that keeps what is typed while a message is sent
and says when a paste was cut, a layout where the composer covers nothing at 390 px, and
a research loop's Pause / Steer / Stop."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from agents_app.models import Agent, AgentCommand
from agentsys.chat.reports import child_report_message
from agentsys.types import TurnStatus
from events_app.events import chat_stream, record_event
from memory_app.models import MemoryEntry
from research_app.models import ResearchLoop
from runtime_app.chat_store import DjangoChatStore
from sessions_app.models import ChatMessage, ChatSession, ChatTurn
from tests.chromium import chat_ready, off_the_page_thread, screenshot

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

REPLY = (
    "Use `lr=0.1`, **not** 1.0:\n\n- it converged\n- it was stable\n\n"
    "<script>window.pwned = 1</script><b>bold?</b>"
)
GOAL = "Find the best learning rate for train.py"


def shot(page, name: str) -> None:
    """The screenshot a person looks at, at 1280 px and at 390 px, kept under test-artifacts."""
    width = page.viewport_size["width"]
    for size, suffix in (((1280, 900), ""), ((390, 844), "-390")):
        page.set_viewport_size({"width": size[0], "height": size[1]})
        page.evaluate(
            "() => { const c = document.getElementById('chat');"
            " if (c) c.scrollTop = c.scrollHeight; }"
        )
        screenshot(page, f"{name}{suffix}")
    page.set_viewport_size({"width": width, "height": 900 if width > 400 else 844})


def _loop(**fields) -> ResearchLoop:
    agent = Agent.objects.create(
        id="orchestrator-read1",
        role="orchestrator",
        cls_path="x",
        project="p",
        goal=GOAL,
        **fields,
    )
    return ResearchLoop.objects.create(agent=agent, goal=GOAL, settings={"max_iterations": 5})


def _chat(messages: int = 8) -> ChatSession:
    session = ChatSession.objects.create(title="Tune", owner=get_user_model().objects.get())
    for i in range(messages):
        ChatMessage.objects.create(
            session=session,
            seq=i + 1,
            role="user" if i % 2 else "assistant",
            content=f"message {i}: " + "words " * 40,
        )
    return session


def _synthetic_turn(session: ChatSession, loop: ResearchLoop) -> ChatTurn:
    report = {
        "id": loop.agent_id,
        "kind": "research loop",
        "status": "done",
        "goal": GOAL,
        "iteration_log": "## Iteration 1\n- promise: DONE",
    }
    return ChatTurn.objects.create(
        session=session,
        status=TurnStatus.RUNNING,
        synthetic=True,
        message=child_report_message(report),
        variables={"child_id": loop.agent_id},
    )


def test_replies_read_as_markdown_and_a_loop_end_as_one_line(site):
    url, page = site
    loop = _loop(status="done")
    session = _chat(messages=2)
    turn = _synthetic_turn(session, loop)
    ChatMessage.objects.create(
        session=session, seq=3, role="system", content=turn.message, turn=turn
    )
    ChatMessage.objects.create(session=session, seq=4, role="assistant", content=REPLY, turn=turn)
    page.goto(f"{url}/chat/{session.pk}/")

    last = page.locator("article.msg.assistant").last
    expect(last.locator("code")).to_have_text("lr=0.1")
    expect(last.locator("strong")).to_have_text("not")
    expect(last.locator("li")).to_have_count(2)
    expect(last).to_contain_text("<b>bold?</b>")  # HTML from a model shows as typed
    assert page.evaluate("() => window.pwned") is None
    notice = page.locator("article.msg.system")
    expect(notice).to_have_text(f"The research loop “{GOAL}” ended: done. See the loop")
    expect(notice.get_by_role("link", name="See the loop")).to_have_attribute(
        "href", f"/research/{loop.agent_id}/"
    )
    assert "Summarise these results" not in page.content()

    # Live: the next report and a reply streamed in, the same way.
    other = Agent.objects.create(
        id="orchestrator-read2",
        role="orchestrator",
        cls_path="x",
        project="p",
        goal="Try warmup",
        status="stopped",
    )
    ResearchLoop.objects.create(agent=other, goal="Try warmup")
    ChatTurn.objects.filter(pk=turn.pk).update(status=TurnStatus.DONE)
    live = _synthetic_turn(session, ResearchLoop.objects.get(agent=other))
    off_the_page_thread(DjangoChatStore().begin_turn, turn_id=live.pk, agent_id="session-x")
    stream = chat_stream(session.pk)
    for delta in ("Warmup **helped**", ": see `run-3`."):
        record_event(
            stream=stream,
            kind="part_delta",
            payload={"turn_id": live.pk, "id": "p1", "ptype": "text", "delta": delta},
            publish_live=False,
        )
    # The socket picks them up from the event log (as after any drop), in their order.
    page.evaluate("() => window.AgentSysChat.socket.close()")
    expect(page.locator("article.msg.system").last).to_have_text(
        "The research loop “Try warmup” ended: stopped. See the loop"
    )
    streamed = page.locator("article.msg.assistant.streamed")
    expect(streamed.locator("strong")).to_have_text("helped")
    expect(streamed.locator("code")).to_have_text("run-3")
    shot(page, "chat-markdown-and-loop-end")


def test_the_composer_keeps_what_is_typed_while_sending_and_says_when_a_paste_is_cut(site):
    url, page = site
    session = _chat(messages=0)
    page.goto(f"{url}/chat/{session.pk}/")
    chat_ready(page)
    held = []
    page.route("**/send/", lambda route: held.append(route))
    box = page.get_by_role("textbox", name="Message")
    box.fill("What is the best learning rate?")
    box.press("Enter")
    expect(box).to_have_value("")  # emptied as it leaves, not when the server answers
    box.press_sequentially("and the batch size")  # typed while the message is on its way
    page.wait_for_timeout(200)
    assert len(held) == 1
    held[0].fulfill(status=202, content_type="application/json", body=json.dumps({"turn_id": "t"}))
    expect(page.locator("#stop")).to_be_visible()
    expect(box).to_have_value("and the batch size")

    # Not sent: the message comes back, ahead of anything typed since.
    page.unroute("**/send/")
    page.reload()
    page.route(
        "**/send/",
        lambda route: route.fulfill(
            status=409,
            content_type="application/json",
            body=json.dumps({"detail": "A reply is still streaming."}),
        ),
    )
    box.fill("What is the best learning rate?")
    box.press("Enter")
    expect(page.locator("#chat-error")).to_have_text("A reply is still streaming.")
    expect(box).to_have_value("What is the best learning rate?")

    # A paste past the 100,000-character limit: cut to fit, and said so.
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    box.fill("abc")
    page.evaluate("() => navigator.clipboard.writeText('x'.repeat(100050))")
    box.press("End")
    box.press("Control+V")
    notice = page.locator("#composer-notice")
    expect(notice).to_be_visible()
    expect(notice).to_contain_text("53 of its 100,050 characters were left out")
    assert len(box.input_value()) == 100_000 and box.input_value().startswith("abcxxx")
    shot(page, "chat-paste-cut")
    box.press("Control+A")
    box.press("Backspace")
    expect(notice).to_be_hidden()


def test_at_390px_the_composer_covers_no_message(site):
    url, page = site
    session = _chat(messages=12)
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{url}/chat/{session.pk}/")
    page.evaluate(
        "() => { const c = document.getElementById('chat'); c.scrollTop = c.scrollHeight; }"
    )
    last = page.locator("article.msg").last.bounding_box()
    composer = page.locator("#composer").bounding_box()
    assert last["y"] + last["height"] <= composer["y"] + 1, (last, composer)
    assert composer["y"] + composer["height"] <= 844 + 1, composer  # Send is on the screen
    expect(page.locator("#send")).to_be_in_viewport()
    screenshot(page, "chat-390")
    page.set_viewport_size({"width": 1280, "height": 900})
    page.evaluate(
        "() => { const c = document.getElementById('chat'); c.scrollTop = c.scrollHeight; }"
    )
    last = page.locator("article.msg").last.bounding_box()
    composer = page.locator("#composer").bounding_box()
    assert last["y"] + last["height"] <= composer["y"] + 1, (last, composer)
    screenshot(page, "chat-1280")


def test_a_research_loop_is_paused_steered_and_stopped_from_its_page(site):
    url, page = site
    loop = _loop(status="running")
    for kind, data in (
        ("plan", {"plan": "1. Baseline at lr=0.1\n2. Try lr=0.3\n3. Keep the better one"}),
        ("context", {"iteration": 1, "promise": "WAITING", "summary": "Waiting on two runs."}),
        ("reflection", {"text": "lr=0.3 diverged after 200 steps; 0.1 is safe.", "tag": "lr"}),
    ):
        MemoryEntry.objects.create(type=kind, project="p", agent_id=loop.agent_id, data=data)
    page.goto(f"{url}/")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Research").click()
    page.wait_for_url(f"{url}/research/")
    page.get_by_role("link", name=GOAL).click()
    page.get_by_role("button", name="Pause").click()
    expect(page.locator(".messages")).to_contain_text("Pause sent")
    assert AgentCommand.objects.filter(agent_id=loop.agent_id, kind="pause").exists()

    page.get_by_text("Steer this loop").click()
    page.get_by_label("What it should know or do").fill("Try a cosine schedule")
    # The body re-renders as the loop moves: the words being typed stay.
    page.evaluate(
        "() => htmx.ajax('GET', window.location.pathname, { target: '#loop', swap: 'innerHTML' })"
    )
    page.wait_for_timeout(500)
    expect(page.get_by_label("What it should know or do")).to_have_value("Try a cosine schedule")
    page.get_by_role("button", name="Send the steer").click()
    expect(page.locator(".messages")).to_contain_text("Steer sent")
    record_event_off = {"stream": "agents", "kind": "paused", "agent_id": loop.agent_id}
    off_the_page_thread(record_event, **record_event_off, payload={})
    page.reload()
    expect(page.locator("#loop-timeline")).to_contain_text("Paused")
    memories = page.locator("ul.memories")
    expect(memories.locator("li li")).to_have_count(3)  # the plan, as a list
    expect(memories).to_contain_text("Iteration 1 Waiting for results Waiting on two runs.")
    expect(memories).to_contain_text("lr=0.3 diverged after 200 steps; 0.1 is safe.")
    expect(memories).not_to_contain_text("{'")
    shot(page, "research-loop-controls")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Memory").click()
    expect(page.locator("#entries")).to_contain_text(
        "Iteration 1 Waiting for results Waiting on two runs."
    )
    expect(page.locator("#entries")).not_to_contain_text("{")
    shot(page, "memory-entries")
    page.goto(f"{url}/research/{loop.agent_id}/")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Stop").click()
    expect(page.locator(".messages")).to_contain_text("Stop sent")
    assert AgentCommand.objects.filter(agent_id=loop.agent_id, kind="stop").exists()
