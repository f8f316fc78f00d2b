"""A chat's action card says what the session agent did in words and, for a research loop it
started, how far the loop has got: its state, iterations, runs ended of started and the best
loss so far, asked again while the loop runs (issue 34)."""

import math

import pytest

from agents_app.models import Agent
from agentsys.types import TurnStatus
from research_app.models import ResearchLoop
from scheduler_app.metrics.series import record_rows
from scheduler_app.models import Run, Sweep
from sessions_app.models import ChatMessage, ChatSession, ChatTurn

pytestmark = pytest.mark.django_db


@pytest.fixture
def running_loop():
    agent = Agent.objects.create(
        id="orchestrator-lr", role="research", cls_path="x", project="p", status="running"
    )
    sweep = Sweep.objects.create(name="lr", kind="research")
    loop = ResearchLoop.objects.create(
        agent=agent,
        goal="find lr",
        sweep=sweep,
        settings={"max_iterations": 5},
        state={"phase": "iterating"},
        iteration=2,
    )
    for name, status, loss in (
        ("lr 0.1", "done", 0.5),
        ("lr 0.3", "failed", math.nan),
        ("lr 0.03", "done", 0.25),
        ("lr 0.01", "running", None),
    ):
        run = Run.objects.create(name=name, command="python t.py", sweep=sweep, status=status)
        if loss is not None:
            record_rows(agent_id=f"exec-{name}", run_id=run.pk, rows=[{"_step": 1, "loss": loss}])
    return loop


def chat_with(owner, actions):
    session = ChatSession.objects.create(title="Tune", owner=owner)
    turn = ChatTurn.objects.create(session=session, status=TurnStatus.DONE, actions=actions)
    ChatMessage.objects.create(
        session=session, seq=1, role="assistant", content="On it.", turn=turn
    )
    return session


def card_of(page: str) -> str:
    return page.split('class="action-card')[1].split("</article>")[0]


def test_a_loops_card_says_it_started_one_and_shows_its_progress(browser, running_loop):
    action = {"action": "spawn_research", "goal": "find lr", "agent_id": "orchestrator-lr"}
    session = chat_with(browser.user, [{**action, "error": ""}])
    card = card_of(browser.get(f"/chat/{session.pk}/").content.decode())
    assert '<a href="/research/orchestrator-lr/">Started a research loop</a>' in card
    assert "spawnresearch" not in card and "spawn_research" not in card
    assert "running iteration 3" in card
    assert "iterations done: <strong>2</strong> of 5" in card
    assert "runs ended: <strong>3</strong> of 4" in card
    assert "best loss so far:" in card and "0.25" in card and "lr 0.03" in card
    assert 'hx-get="/research/orchestrator-lr/progress/" hx-trigger="every 3s"' in card


def test_the_progress_line_stops_asking_once_the_loop_has_ended(browser, running_loop):
    live = browser.get("/research/orchestrator-lr/progress/").content.decode()
    assert 'hx-trigger="every 3s"' in live
    Agent.objects.filter(pk="orchestrator-lr").update(status="stopped")
    ended = browser.get("/research/orchestrator-lr/progress/").content.decode()
    assert ">stopped</span>" in ended and "hx-trigger" not in ended
    assert browser.get("/research/orchestrator-none/progress/").status_code == 404


def test_other_cards_read_as_words_and_a_refused_one_says_what_was_not_done(browser):
    session = chat_with(
        browser.user,
        [
            {"action": "spawn_command", "command": "python t.py", "agent_id": "executor-1"},
            {"action": "stop_child", "agent_id": "", "error": "no such child"},
        ],
    )
    page = browser.get(f"/chat/{session.pk}/").content.decode()
    assert '<a href="/agents/#agent-executor-1">Started a run</a>' in page
    assert "Could not stop the experiment" in page and "Not carried out: no such child" in page
    assert "stopchild" not in page and "spawncommand" not in page
    assert '<script id="action-words" type="application/json">' in page


def test_a_loop_without_a_sweep_counts_no_one_elses_runs(browser):
    Run.objects.create(name="someone else's", command="true", status="done")
    agent = Agent.objects.create(
        id="orchestrator-bare", role="research", cls_path="x", project="p", status="running"
    )
    ResearchLoop.objects.create(agent=agent, goal="g", state={"phase": "planning"})
    line = browser.get("/research/orchestrator-bare/progress/").content.decode()
    assert ">planning</span>" in line and "runs ended: <strong>0</strong> of 0" in line
    assert "no loss logged yet" in line
