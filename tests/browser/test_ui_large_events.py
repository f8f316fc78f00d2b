"""Big events in Chromium (issue 18 item 3), against a real daphne and runagentd, the real
OpenCode server and the project's scripted model.

A 7,000-character message in agent mode used to leave the chat on "Stop" with Send disabled
until a reload (its event was over PostgreSQL's 8,000-byte NOTIFY limit). Here 10 kB and 100 kB
messages get their reply and Send back; a research loop whose state events are tens of kB
shows live on its page; and a web server that goes away mid-reply shows "reconnecting…", then
heals with the whole reply once it is back.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from agents_app.models import Agent
from agentsys.scripted_llm.server import last_user_text
from events_app.models import Event
from sessions_app.models import ChatMessage, ChatTurn
from tests.chromium import PASSWORD, USER, chat_ready, log_in, screenshot
from tests.helpers import wait_until
from tests.live_clients import Web

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
SHOTS = Path("/work/shots/events")
STEPS = [f"Step {n}: try lr={n / 100:.2f} " + "and log every loss; " * 50 for n in range(30)]
GOAL = "Map the learning rate of train.py"
WAIT_MS = 30_000  # a passing test waits a second or two; the machine may be busy


class Site:
    """A daphne that a test can take away and bring back on the same port."""

    def __init__(self, workdir):
        self.port, self.workdir = 0, workdir
        self.web = self._start()
        self.port = self.web.port  # a restart comes back on the same port

    def _start(self) -> Web:
        return Web(self.port, AGENTSYS_WORKDIR=str(self.workdir))

    @property
    def url(self) -> str:
        return self.web.url

    def crash(self) -> None:
        self.web.process.kill()
        self.web.process.wait(15)

    def restart(self) -> None:
        self.web = self._start()


@pytest.fixture
def site(chromium, workdir):
    get_user_model().objects.create_user(USER, password=PASSWORD)
    server = Site(workdir)
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(30_000)
    log_in(page, server.url)
    yield server, context, page
    for open_page in context.pages:
        open_page.wait_for_load_state("networkidle")
    context.close()
    server.web.stop()


def shoot(page, name: str) -> None:
    """The test's screenshots (test-artifacts, whole page) and what the window shows, at 1280
    and 390 px, to look at (a whole-page shot shows the chat's own scroll box mid-way)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    for width, height, suffix in ((1280, 900, ""), (390, 844, "-phone")):
        page.set_viewport_size({"width": width, "height": height})
        screenshot(page, f"{name}{suffix}")
        page.screenshot(path=str(SHOTS / f"{name}{suffix}.png"))
    page.set_viewport_size({"width": 1280, "height": 900})


def new_chat(page, url: str, mode: str) -> None:
    page.goto(f"{url}/chat/")
    page.get_by_role("button", name="New chat").click()
    chat_ready(page)
    page.get_by_label(mode).check()


def send(page, text: str) -> None:
    page.get_by_role("textbox", name="Message").fill(text)
    page.get_by_role("button", name="Send").click()


def expect_reply_done(page, count: int, text: str) -> None:
    expect(page.locator("article.msg.assistant")).to_have_count(count, timeout=WAIT_MS)
    expect(page.locator("article.msg.assistant").last).to_contain_text(text, timeout=WAIT_MS)
    expect(page.locator("#stop")).to_be_hidden(timeout=WAIT_MS)
    expect(page.get_by_role("button", name="Send")).to_be_enabled()


def test_big_messages_in_agent_mode_get_their_reply_and_send_back(site, make_daemon, scripted_llm):
    server, _, page = site
    scripted_llm.load(
        {
            "turns": [
                {"match": "chat-agent", "steps": [{"text": "Read all 10 kB of it."}]},
                {"match": "chat-agent", "steps": [{"text": "Read all 100 kB of it."}]},
            ]
        }
    )
    make_daemon()
    new_chat(page, server.url, "agent")
    for n, size in enumerate((10_000, 100_000), start=1):
        text = (f"Message {n}. " + "The loss went down, then up. " * (size // 29))[:size]
        send(page, text)
        expect(page.locator("article.msg.user").nth(n - 1)).to_contain_text(
            f"Message {n}.", timeout=WAIT_MS
        )
        expect_reply_done(page, n, f"Read all {size // 1000} kB of it.")
        shown = page.locator("article.msg.user .text").nth(n - 1).text_content()
        assert shown == text.strip()  # the whole message (as sent: trimmed), live
    assert page.evaluate("() => window.AgentSysChat.drops") == 0  # no reconnect was needed
    assert ChatMessage.objects.filter(role="user").count() == 2
    shoot(page, "chat-100kb-agent-mode")


def _loop_script() -> dict:
    steps = "\n".join(f"{n + 1}. {step}" for n, step in enumerate(STEPS))
    plan = f"<plan>\n{steps}\n</plan>\n<summary>A thirty-step map.</summary>"
    return {
        "turns": [
            {
                "match": r"chat-wild.*\[USER\] ",
                "steps": [
                    {"text": f"Starting it.\n<spawn_research>\ngoal: {GOAL}\n</spawn_research>"}
                ],
            },
            # Long enough to open the loop's page before the big events come.
            {"match": r"agentsys-prompt: planning", "steps": [{"stall": 4}, {"text": plan}]},
            {
                "match": r"Iteration 1 of",
                "steps": [
                    {"text": "Nothing to run.\n<promise>DONE</promise>\n<summary>Mapped.</summary>"}
                ],
            },
            {
                "match": r"agentsys-prompt: reflection",
                "steps": [
                    {"text": "<reflection>Planned only.</reflection>\n<continue>no</continue>"}
                ],
            },
            {"match": r"\[SYSTEM\] The research loop", "steps": [{"text": "The loop is done."}]},
        ]
    }


def test_a_research_loop_with_big_events_shows_live_on_its_page(site, make_daemon, scripted_llm):
    server, context, page = site
    scripted_llm.load(_loop_script())
    make_daemon()
    new_chat(page, server.url, "wild")
    send(page, "Map the learning rate, please.")
    expect(page.locator(".action-card")).to_contain_text("Started a research loop", timeout=WAIT_MS)
    loop = wait_until(lambda: Agent.objects.filter(goal=GOAL).first(), 30, message="the loop")
    research = context.new_page()
    research.goto(f"{server.url}/research/{loop.id}/")
    # The Plan card's list (the plan's memory entry below lists the same steps).
    expect(research.locator("#loop-plan ul.plan li")).to_have_count(30, timeout=60_000)
    expect(research.locator("#loop-status")).to_have_text("done", timeout=60_000)
    expect(research.locator("#loop-plan ul.plan")).to_contain_text(STEPS[29].strip())
    assert research.evaluate("() => [...AgentSysLive.followers][0].drops") == 0
    # The loop's end reaches the chat by itself, as a synthetic turn.
    expect(page.locator("article.msg.assistant").last).to_contain_text(
        "The loop is done.", timeout=60_000
    )
    shoot(research, "research-loop-big-plan")


def test_a_web_server_gone_mid_reply_shows_reconnecting_then_heals(site, make_daemon, scripted_llm):
    server, _, page = site
    reply = "Here is the long answer, chunk by chunk. " * 8
    scripted_llm.load(
        {
            "turns": [
                {"match": "chat-agent", "steps": [{"chunk_delay": 0.3}, {"text": reply}]},
                {"match": "chat-agent", "steps": [{"text": "Back to normal."}]},
            ]
        }
    )
    make_daemon()
    new_chat(page, server.url, "agent")
    send(page, "Answer slowly. " * 600)  # ~9 kB
    page.wait_for_function(
        "() => (document.querySelector('article.msg.assistant.streamed .text')?.textContent"
        " || '').length > 20"
    )
    server.crash()
    badge = page.locator("#live-state")
    expect(badge).to_have_text("reconnecting…", timeout=WAIT_MS)
    expect(page.locator("#stop")).to_be_visible()  # the reply is still going, out of sight
    shoot(page, "chat-reconnecting")
    page.locator("#stop").click()  # with no server to take it, the page says so
    expect(page.locator("#chat-error")).to_have_text("Not stopped: the server did not answer.")
    server.restart()
    expect(badge).to_have_text("live", timeout=WAIT_MS)
    # What streamed while the page was cut off arrives: the whole reply, and Send is back.
    # (Its last words repeat: the whole text, which the page renders up to 40 ms after its
    # last delta, is what is waited for. Reading it at once caught it a chunk short.)
    expect_reply_done(page, 1, reply.strip()[-40:])
    expect(page.locator("article.msg.assistant .text").first).to_have_text(reply.strip())
    send(page, "And now?")
    expect(page.locator("article.msg.user")).to_have_count(2, timeout=WAIT_MS)
    try:
        expect_reply_done(page, 2, "Back to normal.")
    except AssertionError as error:  # where it stuck: the page, the turns, the model
        raise AssertionError(f"{error}\n{_chat_state(page, scripted_llm)}") from None


def _chat_state(page, scripted_llm) -> str:
    turns = ChatTurn.objects.order_by("started_at").values_list("status", "host_id", "error")
    events = Event.objects.filter(stream__startswith="chat.").order_by("seq")
    kinds = [f"{e.seq}:{e.kind}" for e in events if e.kind != "part_delta"]
    asked = [last_user_text(body)[-60:] for body in scripted_llm.requests]
    return (
        f"page error line: {page.locator('#chat-error').text_content()!r}; "
        f"send disabled: {page.get_by_role('button', name='Send').is_disabled()}; "
        f"badge: {page.locator('#live-state').text_content()!r}\n"
        f"turns: {list(turns)}\nevents (no deltas): {kinds}\nmodel asked: {asked}"
    )
