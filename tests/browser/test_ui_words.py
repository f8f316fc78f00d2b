"""What a person reads (issue 34 item 4), in Chromium against a real daphne: a chat's card of
the research loop it started, with the loop's progress kept up to date while it runs."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from agents_app.models import Agent
from agentsys.types import TurnStatus
from events_app.events import chat_stream, record_event
from research_app.models import ResearchLoop
from scheduler_app.metrics.series import record_rows
from scheduler_app.models import Alert, Run, Sweep
from sessions_app.models import ChatMessage, ChatSession, ChatTurn
from tests.browser.test_ui_reading import shot
from tests.chromium import chat_ready, off_the_page_thread

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _running_loop(agent_id: str, goal: str) -> Sweep:
    agent = Agent.objects.create(
        id=agent_id, role="research", cls_path="x", project="p", goal=goal, status="running"
    )
    sweep = Sweep.objects.create(name=goal, kind="research")
    ResearchLoop.objects.create(
        agent=agent,
        goal=goal,
        sweep=sweep,
        settings={"max_iterations": 5},
        state={"phase": "iterating"},
        iteration=1,
    )
    return sweep


def _run(sweep: Sweep, name: str, status: str, loss: float | None = None) -> Run:
    run = Run.objects.create(name=name, command="python t.py", sweep=sweep, status=status)
    if loss is not None:
        record_rows(agent_id=f"exec-{name}", run_id=run.pk, rows=[{"_step": 1, "loss": loss}])
    return run


def test_a_chat_shows_the_loop_it_started_and_how_far_it_has_got(site):
    url, page = site
    sweep = _running_loop("orchestrator-words1", "Find the best learning rate")
    _run(sweep, "lr 0.1", "done", 0.5123)
    second = _run(sweep, "lr 0.03", "running")
    session = ChatSession.objects.create(title="Tune", owner=get_user_model().objects.get())
    action = {"action": "spawn_research", "goal": "Find the best learning rate", "error": ""}
    turn = ChatTurn.objects.create(
        session=session,
        status=TurnStatus.DONE,
        actions=[{**action, "agent_id": "orchestrator-words1"}],
    )
    ChatMessage.objects.create(session=session, seq=1, role="user", content="Which lr?")
    ChatMessage.objects.create(
        session=session, seq=2, role="assistant", content="Starting a loop.", turn=turn
    )
    page.goto(f"{url}/chat/{session.pk}/")
    chat_ready(page)
    card = page.locator(".action-card").first
    expect(card.get_by_role("link", name="Started a research loop")).to_have_attribute(
        "href", "/research/orchestrator-words1/"
    )
    progress = card.locator(".loop-progress")
    expect(progress).to_contain_text("running iteration 2")
    expect(progress).to_contain_text("runs ended: 1 of 2")
    expect(progress).to_contain_text("best loss so far: 0.5123")

    # The loop moves on: the card follows without a reload.
    Run.objects.filter(pk=second.pk).update(status="done")
    record_rows(agent_id="exec-2", run_id=second.pk, rows=[{"_step": 1, "loss": 0.25}])
    ResearchLoop.objects.filter(agent_id="orchestrator-words1").update(iteration=2)
    expect(progress).to_contain_text("runs ended: 2 of 2", timeout=8000)
    expect(progress).to_contain_text("best loss so far: 0.25")
    expect(progress).to_contain_text("iterations done: 2 of 5")

    # A loop started while the page is open: its card comes in live, progress and all.
    later = _running_loop("orchestrator-words2", "Try a warmup")
    _run(later, "warmup 100", "running")
    record_event_in_chat = {
        "stream": chat_stream(session.pk),
        "kind": "l1_action",
        "payload": {
            "turn_id": "turn-live",
            **action,
            "goal": "Try a warmup",
            "agent_id": "orchestrator-words2",
        },
    }
    off_the_page_thread(record_event, **record_event_in_chat)
    # Whether or not the live send got there, the socket reads it from the log on reconnect.
    page.evaluate("() => window.AgentSysChat.socket.close()")
    live = page.locator(".action-card").last
    expect(live.get_by_role("link", name="Started a research loop")).to_have_attribute(
        "href", "/research/orchestrator-words2/"
    )
    expect(live.locator(".loop-progress")).to_contain_text("runs ended: 0 of 1")
    expect(live).not_to_contain_text("spawnresearch")
    shot(page, "chat-loop-progress")


def test_an_unknown_page_is_the_sites_own_with_the_nav(site):
    url, page = site
    response = page.goto(f"{url}/no-such-page/")
    assert response.status == 404
    expect(page.get_by_role("heading", name="Page not found")).to_be_visible()
    nav = page.get_by_role("navigation", name="Main")
    expect(nav.get_by_role("link", name="Runs")).to_be_visible()
    shot(page, "not-found")
    page.get_by_role("link", name="Go to the overview").click()
    page.wait_for_url(f"{url}/")


def test_a_short_log_says_its_size_in_bytes_and_an_ended_runs_alert_has_no_stop(site, tmp_path):
    url, page = site
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "run.log").write_text("loss 0.25\n")  # 10 bytes: "0.0 KiB" before
    run = Run.objects.create(name="short", command="true", status="done", run_dir=str(run_dir))
    Alert.objects.create(run=run, message="NaN loss at step 3", choices=["stop"])
    page.goto(f"{url}/runs/{run.pk}/")
    expect(page.locator("#log")).to_contain_text("loss 0.25")
    expect(page.locator("#log-size")).to_have_text("the whole log, 10 bytes")
    shot(page, "run-short-log")
    page.goto(f"{url}/alerts/")
    alert = page.locator(".alert-item")
    expect(alert).to_contain_text("the run has ended")
    expect(alert.get_by_role("button", name="Acknowledge")).to_be_visible()
    expect(alert.get_by_role("button", name="Stop")).to_have_count(0)
    shot(page, "alerts-ended-run")
    page.goto(f"{url}/settings/")
    expect(page.locator("#model-help")).not_to_contain_text("see .env")
    shot(page, "settings-model")


def test_a_stopped_loops_page_says_stopped_and_its_steps_in_words(site):
    url, page = site
    sweep = _running_loop("orchestrator-words3", "Find the best learning rate")
    history = [
        {"iteration": 0, "phase": "plan", "summary": "Three learning rates, then the best."},
        {"iteration": 1, "phase": "iteration", "promise": "WAITING", "summary": "Two runs."},
        {"iteration": 1, "phase": "reflection", "promise": "REFLECT_STOP", "summary": "Enough."},
    ]
    ResearchLoop.objects.filter(sweep=sweep).update(
        state={"phase": "iterating", "history": history}
    )
    Agent.objects.filter(pk="orchestrator-words3").update(status="stopped")
    page.goto(f"{url}/research/orchestrator-words3/")
    expect(page.locator("#loop-status")).to_have_text("stopped")
    expect(page.locator(".page-head")).not_to_contain_text("iterating")
    steps = page.locator("article.iteration h3")
    expect(steps).to_have_text(
        [
            re.compile(r"^Plan"),
            re.compile(r"^Iteration 1 Waiting for results"),
            re.compile(r"^Reflection after iteration 1 Stopped after reflection"),
        ]
    )
    expect(page.locator("#loop")).not_to_contain_text("REFLECT_STOP")
    shot(page, "research-loop-stopped")


def test_a_name_with_a_right_to_left_override_stays_in_its_place(site):
    url, page = site
    evil = "lr\u202etxt.exe"
    sweep = _running_loop("orchestrator-words4", evil)
    _run(sweep, evil, "running", 0.5)
    for path, name in (("/runs/", "runs-bidi"), ("/", "overview-bidi")):
        page.goto(f"{url}{path}")
        isolated = page.locator("bdi", has_text=evil).first
        expect(isolated).to_be_visible()
        # Isolated, the override reverses the name alone, not the words after it.
        assert isolated.evaluate("b => getComputedStyle(b).unicodeBidi") == "isolate"
        shot(page, name)
