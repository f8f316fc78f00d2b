"""A research loop's page in Chromium (issue 37 §5): each steer and pause stands after the
iteration it followed, and each run its report cites is a link that opens that run."""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import expect

from agents_app.models import Agent
from events_app.events import record_event
from research_app.models import ResearchLoop
from scheduler_app.models import Run
from tests.chromium import screenshot

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

GOAL = "Find the learning rate for train.py that gives the lowest final loss"


def _demo_loop() -> tuple[ResearchLoop, list[Run]]:
    """A loop as the demo leaves it: three rates with two seeds each, a steer for lr=0.05
    read by iteration 2, a pause and a resume while iteration 2 ran."""
    agent = Agent.objects.create(
        id="research-shot1", role="orchestrator", cls_path="x", project="p", goal=GOAL
    )
    runs = {
        (lr, seed): Run.objects.create(
            name=f"lr={lr} seed={seed}", command="python train.py", params={"lr": lr}
        )
        for lr in (0.01, 0.1, 0.5)
        for seed in (0, 1)
    }
    now = time.time()
    history = [
        {"iteration": 0, "phase": "plan", "summary": "A search on train.py, two seeds a rate."},
        {
            "iteration": 1,
            "promise": "WAITING",
            "summary": "Launched lr = 0.01, 0.1, 0.5 on train.py with seeds 0 and 1 each.",
            "finished_at": now - 60,
        },
        {
            "iteration": 2,
            "promise": "WAITING",
            "summary": f"lr=0.1 is best so far (run {runs[0.1, 0].pk}); refining, adding 0.05.",
            "finished_at": now + 3600,  # the events below come while it runs
        },
    ]
    history[0]["finished_at"] = now - 120
    losses = {0.01: (0.2412, 0.2466), 0.1: (0.0103, 0.0109), 0.5: (0.0131, 0.0152)}
    cited = "\n".join(
        f"- lr={lr:g}: loss {a} (run {runs[lr, 0].pk}), {b} (run {runs[lr, 1].pk})"
        for lr, (a, b) in losses.items()
    )
    loop = ResearchLoop.objects.create(
        agent=agent,
        goal=GOAL,
        settings={"max_iterations": 6},
        state={"history": history, "phase": "iterating"},
        iteration=2,
        reflection=f"Every rate ran train.py with seeds 0 and 1:\n{cited}",
    )
    for kind, payload in [
        ("steered", {"urgency": "priority", "context": "Please try lr=0.05 as well"}),
        ("paused", {}),
        ("resumed", {}),
    ]:
        record_event(stream="agents", kind=kind, agent_id=agent.id, payload=payload)
    return loop, list(runs.values())


def test_the_loop_page_shows_steers_and_pauses_between_iterations_and_links_cited_runs(site):
    url, page = site
    loop, runs = _demo_loop()
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{url}/research/{loop.agent_id}/")
    after = page.get_by_role("complementary", name="After iteration 1")
    expect(after).to_contain_text("Steered (priority)")
    expect(after).to_contain_text("Please try lr=0.05 as well")
    expect(after).to_contain_text("Paused")
    expect(after).to_contain_text("Resumed")
    # It stands between iteration 1 and iteration 2.
    order = page.evaluate(
        "() => [...document.querySelectorAll('article.iteration, aside.step-controls')]"
        ".map(e => e.id || e.getAttribute('aria-label'))"
    )
    assert order == ["plan-0", "iteration-1", "After iteration 1", "iteration-2"], order
    page.get_by_role("heading", name="Iterations").scroll_into_view_if_needed()
    screenshot(page, "loop-timeline")
    page.get_by_role("link", name=runs[2].pk).first.click()
    page.wait_for_url(f"{url}/runs/{runs[2].pk}/")
    expect(page.get_by_role("heading", level=1)).to_contain_text("lr=0.1 seed=0")
