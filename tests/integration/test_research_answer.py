"""Answering a research loop's question from the chat it was started from (issue 35, item 4):
the chat's card of the loop shows the question with an answer box; the answer sent from it
lands in the loop's inbox (its next prompt), the card says so, the question's alert is
resolved, and an answer to a loop that asks nothing is refused with the reason."""

import pytest

from agents_app.models import Agent
from memory_app.models import MemoryEntry
from research_app.models import ResearchLoop
from scheduler_app.models import Alert
from tests.integration.test_chat_loop_progress import card_of, chat_with

pytestmark = pytest.mark.django_db
QUESTION = "Should the runs use GPU or CPU?"
LOOP = "research-asks"


@pytest.fixture
def asking_loop():
    agent = Agent.objects.create(
        id=LOOP, role="research", cls_path="x", project="p", status="running"
    )
    state = {"phase": "iterating", "status": "running", "iteration": 1}
    state["question"] = {"text": QUESTION, "iteration": 1, "asked_at": 0}
    Alert.objects.create(
        agent_id=LOOP,
        message=f"The research loop asks: {QUESTION}",
        signature="question:1",
        choices=["acknowledge", "stop"],
    )
    return ResearchLoop.objects.create(
        agent=agent, goal="find lr", settings={"max_iterations": 5}, state=state, iteration=1
    )


def test_the_chat_card_asks_the_question_and_takes_the_answer(browser, asking_loop):
    action = {"action": "spawn_research", "goal": "find lr", "agent_id": LOOP, "error": ""}
    session = chat_with(browser.user, [action])
    card = card_of(browser.get(f"/chat/{session.pk}/").content.decode())
    assert "awaiting your answer" in card and QUESTION in card
    assert f'hx-post="/research/{LOOP}/answer/"' in card and 'name="answer"' in card

    sent = browser.post(
        f"/research/{LOOP}/answer/", {"answer": "CPU, please"}, HTTP_HX_REQUEST="true"
    )
    line = sent.content.decode()
    assert sent.status_code == 200 and "Answer sent: the loop reads it now." in line
    assert 'name="answer"' not in line
    message = MemoryEntry.objects.get(target_id=LOOP, type="message")
    assert "CPU, please" in message.data["context"] and QUESTION in message.data["context"]
    assert not Alert.objects.filter(agent_id=LOOP, status="pending").exists()


def test_an_answer_to_a_loop_that_asks_nothing_is_refused(browser, api, asking_loop):
    asking_loop.state = {"phase": "iterating", "status": "running", "iteration": 1}
    asking_loop.save()
    refused = api("post", f"/api/research/{LOOP}/answer", {"answer": "CPU"})
    assert refused.status_code == 409 and "not waiting for an answer" in refused.json()["detail"]
    line = browser.post(
        f"/research/{LOOP}/answer/", {"answer": "CPU"}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert "Not sent:" in line and "not waiting for an answer" in line
    assert api("post", "/api/research/research-none/answer", {"answer": "x"}).status_code == 404
    assert not MemoryEntry.objects.filter(target_id=LOOP).exists()
