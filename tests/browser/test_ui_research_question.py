"""A research loop started from a chat asks the researcher a question (issue 35, item 4), in
Chromium against the real stack (daphne, runagentd, the real OpenCode, the scripted model):
the chat's card of the loop and the loop's page both show the question with an answer box; the
person answers on the loop page, and the loop goes on with the answer in its next prompt.
Screenshots of both pages while the loop waits."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from research_app.models import ResearchLoop
from tests.chromium import chat_ready, screenshot
from tests.e2e.test_research_e2e import ITERATION_2, PLAN, REFLECTION, _turn, prompts_seen
from tests.helpers import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
GOAL = "Find the best learning rate for train.py"
QUESTION = "Should the runs use GPU or CPU?"
ANSWER = "CPU please: the GPUs are booked this week."


def _script() -> dict:
    return {
        "turns": [
            _turn(
                r"chat-wild.*\[USER\] ",
                f"Starting a loop.\n<spawn_research>\ngoal: {GOAL}\n</spawn_research>",
            ),
            _turn(r"agentsys-prompt: planning", PLAN),
            _turn(r"Iteration 1 of", f"I read train.py; it runs on either device. {QUESTION}"),
            _turn(r"Iteration 2 of.*CPU please", ITERATION_2),
            _turn(r"agentsys-prompt: reflection", REFLECTION),
            _turn(r"\[SYSTEM\] The research loop", "The loop finished: lr=0.2 is best."),
        ]
    }


@pytest.mark.timeout(300)  # a real chat, loop and model behind OpenCode, on a shared machine
def test_a_loops_question_shows_in_its_chat_and_page_and_is_answered_there(
    site_in_workdir, make_daemon, scripted_llm
):
    url, context, page = site_in_workdir
    scripted_llm.load(_script())
    make_daemon()
    page.goto(f"{url}/chat/")
    page.get_by_role("button", name="New chat").click()
    chat_ready(page)
    page.get_by_label("wild").check()
    page.get_by_role("textbox", name="Message").fill("Which learning rate is best?")
    page.keyboard.press("Enter")

    card = page.locator(".action-card")
    expect(card).to_contain_text("Started a research loop", timeout=60_000)
    asked = card.locator(".loop-question")
    expect(asked).to_contain_text(QUESTION, timeout=60_000)  # the card's line asks again
    pill = card.locator(".loop-progress .pill").first
    expect(pill).to_have_text("awaiting your answer")
    expect(pill).to_have_class(re.compile(r"\bwarning\b"))
    expect(asked.get_by_role("textbox", name="Your answer")).to_be_visible()
    screenshot(page, "question-chat")

    loop = ResearchLoop.objects.get(goal=GOAL)
    tab = context.new_page()
    tab.goto(f"{url}/research/{loop.agent_id}/")
    question = tab.locator("#loop-question")
    expect(question).to_contain_text(QUESTION)
    expect(tab.locator("#loop-status")).to_have_text("awaiting your answer")
    screenshot(tab, "question-loop-page")
    tab.set_viewport_size({"width": 390, "height": 844})
    screenshot(tab, "question-loop-page-phone")
    tab.set_viewport_size({"width": 1280, "height": 900})

    question.get_by_label("Your answer").fill(ANSWER)
    question.get_by_role("button", name="Send the answer").click()
    expect(tab.locator(".messages")).to_contain_text("Answer sent")
    expect(tab.locator("#loop-status")).to_have_text("done", timeout=60_000)
    expect(tab.locator("#loop-question")).to_have_count(0)
    expect(tab.locator("#loop-timeline")).to_contain_text("Asked the researcher")
    wait_until(
        lambda: any(ANSWER in p and "Iteration 2 of" in p for p in prompts_seen(scripted_llm)),
        10,
        message="the answer in the loop's next prompt",
    )
    # The chat's card says the loop ended, its question gone.
    expect(card.locator(".loop-question")).to_have_count(0, timeout=15_000)
    screenshot(tab, "question-loop-page-answered")
