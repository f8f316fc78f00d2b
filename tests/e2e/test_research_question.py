"""A loop whose model asks the researcher something, or answers in prose with none of the tags
the loop acts on (issue 35, item 4). Against a real runagentd, the real OpenCode and the
project's scripted model: the question reaches the person (the loop's state, its page, an
alert), the loop waits without asking its model anything, and the answer is in its next
prompt; a tagless reply gets a note, and two in a row pause the loop, saying why."""

from __future__ import annotations

import signal

import pytest

from agents_app.models import Agent
from events_app.models import Event
from research_app.models import ResearchLoop
from scheduler_app.models import Alert
from tests.e2e.test_research_e2e import (
    ITERATION_2,
    PLAN,
    REFLECTION,
    _turn,
    prompts_seen,
    start_loop,
    wait_finished,
)
from tests.helpers import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

QUESTION = "Should the runs use GPU or CPU?"
ASKING = f"I read train.py; it runs on either. Before I launch the sweep: {QUESTION}"
ANSWER = "Use the CPU: the GPUs are booked all week."
TAGLESS = "I looked at train.py and the data. It is a small linear model; next I will tune lr."
NOTE = "none of the expected tags"


def asking_script(after_answer: str) -> dict:
    """Plan, a question in prose (no tags), then (once the answer is in the prompt) DONE."""
    return {
        "turns": [
            _turn(r"agentsys-prompt: planning", PLAN),
            _turn(r"Iteration 1 of", ASKING),
            _turn(after_answer, ITERATION_2),
            _turn(r"agentsys-prompt: reflection", REFLECTION),
        ]
    }


def awaiting(api, loop_id: str) -> dict:
    """Wait until the API says the loop awaits the answer; its JSON then."""
    return wait_until(
        lambda: (
            (body := api("get", f"/api/research/{loop_id}").json())["state"] == "awaiting_reply"
            and body
        ),
        60,
        interval=0.1,
        message="the loop to await the researcher's answer",
    )


def iteration_prompts(scripted_llm) -> list[str]:
    return [p for p in prompts_seen(scripted_llm) if "agentsys-prompt: iteration" in p]


def test_a_question_waits_for_the_answer_which_reaches_the_next_prompt(
    api, client, admin_user, workdir, make_daemon, scripted_llm
):
    daemon = make_daemon()
    scripted_llm.load(asking_script(r"Iteration 2 of.*Use the CPU: the GPUs are booked"))
    loop_id = start_loop(api, workdir)
    body = awaiting(api, loop_id)
    assert QUESTION in body["question"]

    alert = wait_until(
        lambda: Alert.objects.filter(agent_id=loop_id, status="pending").first(),
        10,
        message="the question's alert",
    )
    assert QUESTION in alert.message
    client.force_login(admin_user)
    page = client.get(f"/research/{loop_id}/").content.decode()
    assert QUESTION in page and "awaiting your answer" in page and 'name="answer"' in page

    # Waiting survives a restart of runagentd, and asks the model nothing meanwhile.
    daemon.stop(signal.SIGKILL)
    make_daemon()
    wait_until(
        lambda: Event.objects.filter(agent_id=loop_id, kind="resumed_after_restart").exists(),
        30,
        message="the new runagentd to take the loop back",
    )
    assert awaiting(api, loop_id)["iteration"] == 1
    assert len(iteration_prompts(scripted_llm)) == 1, "the waiting loop asked its model again"

    answered = api("post", f"/api/research/{loop_id}/answer", {"answer": ANSWER})
    assert answered.status_code == 202, answered.content
    agent = wait_finished(loop_id)
    assert agent.status == "done", agent.error
    second = iteration_prompts(scripted_llm)[1]
    assert "Iteration 2 of" in second and ANSWER in second and QUESTION in second
    assert not Alert.objects.filter(agent_id=loop_id, status="pending").exists()
    again = api("post", f"/api/research/{loop_id}/answer", {"answer": "late"})
    assert again.status_code == 409  # nothing asked any more


def test_a_stop_while_the_loop_waits_for_an_answer_ends_it_at_once(
    api, workdir, make_daemon, scripted_llm
):
    make_daemon()
    scripted_llm.load(asking_script(r"Iteration 2 of"))
    loop_id = start_loop(api, workdir)
    awaiting(api, loop_id)
    assert api("post", f"/api/research/{loop_id}/stop").status_code == 202
    agent = wait_finished(loop_id, timeout=15)
    assert agent.status == "stopped"
    assert len(iteration_prompts(scripted_llm)) == 1
    wait_until(
        lambda: not Alert.objects.filter(agent_id=loop_id, status="pending").exists(),
        10,
        message="the question's alert resolved with the loop's end",
    )


def test_one_tagless_reply_gets_a_note_naming_the_tags_in_the_next_prompt(
    api, workdir, make_daemon, scripted_llm
):
    make_daemon()
    scripted_llm.load(
        {
            "turns": [
                _turn(r"agentsys-prompt: planning", PLAN),
                _turn(r"Iteration 1 of", TAGLESS),
                _turn(r"Iteration 2 of", ITERATION_2),
                _turn(r"agentsys-prompt: reflection", REFLECTION),
            ]
        }
    )
    loop_id = start_loop(api, workdir)
    agent = wait_finished(loop_id)
    assert agent.status == "done", agent.error
    second = iteration_prompts(scripted_llm)[1]
    assert NOTE in second and "promise" in second and "summary" in second
    assert second.count(NOTE) == 1


def test_two_tagless_replies_in_a_row_pause_the_loop_and_say_why(
    api, client, admin_user, workdir, make_daemon, scripted_llm
):
    make_daemon()
    scripted_llm.load(
        {
            "turns": [
                _turn(r"agentsys-prompt: planning", PLAN),
                _turn(r"Iteration 1 of", TAGLESS),
                _turn(r"Iteration 2 of", TAGLESS),
                _turn(r"Iteration 3 of", ITERATION_2),
                _turn(r"agentsys-prompt: reflection", REFLECTION),
            ]
        }
    )
    loop_id = start_loop(api, workdir)
    wait_until(
        lambda: Agent.objects.filter(pk=loop_id, status="paused").exists(),
        60,
        interval=0.1,
        message="the loop to pause itself",
    )
    event = Event.objects.get(agent_id=loop_id, kind="needs_attention")
    assert "Resume" in event.payload["reason"] and "expected tags" in event.payload["reason"]
    assert Alert.objects.filter(agent_id=loop_id, status="pending", signature="tagless").exists()
    client.force_login(admin_user)
    page = client.get(f"/research/{loop_id}/").content.decode()
    assert "Paused itself" in page and "Resume goes on" in page
    assert len(iteration_prompts(scripted_llm)) == 2
    assert ResearchLoop.objects.get(pk=loop_id).iteration == 2

    assert api("post", f"/api/research/{loop_id}/resume").status_code == 202
    agent = wait_finished(loop_id)
    assert agent.status == "done", agent.error
    assert NOTE in iteration_prompts(scripted_llm)[2]
