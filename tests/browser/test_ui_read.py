"""What a person reads on the runs and agents pages, in Chromium at 1280 and 390 px (issue 18
item 4): durations that tick, a diverging loss charted with readable axes and its error named,
a runs table that fits a phone, idle chats apart from agents at work. Screenshots of each."""

from __future__ import annotations

import re
import sys
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from agents_app.models import Agent
from agentsys.registry import SESSION_AGENT
from agentsys.types import TurnStatus
from scheduler_app.models import Run, RunStatus
from sessions_app.models import ChatSession, ChatTurn
from tests.chromium import screenshot
from tests.helpers import launch_run, run_ended

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
PHONE = {"width": 390, "height": 844}


def _both_widths(page, name: str) -> None:
    screenshot(page, name)
    page.set_viewport_size(PHONE)
    screenshot(page, name + "-phone")
    page.set_viewport_size({"width": 1280, "height": 900})


def _diverging_trainer(tmp_path) -> str:
    """A loss that grows 1e38-fold a step to 5e303, then the float overflows, as a training
    script with a learning rate far too high does."""
    script = tmp_path / "diverge.py"
    script.write_text(
        "import json, os, time\n"
        "out = os.path.join(os.environ['AGENTSYS_RUN_DIR'], 'agent_metrics.jsonl')\n"
        "for step in range(9):\n"
        "    loss = 0.5 * 1e38**step\n"
        "    print(f'step {step} loss {loss:.3g}', flush=True)\n"
        "    with open(out, 'a') as f:\n"
        "        f.write(json.dumps({'_step': step, 'loss': loss}) + '\\n')\n"
        "    time.sleep(0.05)\n"
        "print('squaring the last loss', flush=True)\n"
        "loss = loss**2\n"
    )
    return f"{sys.executable} {script}"


def test_a_diverging_run_names_its_error_and_keeps_its_axis_readable(site, daemon, tmp_path):
    url, page = site
    run = run_ended(launch_run(tmp_path, _diverging_trainer(tmp_path)), timeout=60)
    assert run.status == RunStatus.FAILED
    page.goto(f"{url}/runs/{run.pk}/")
    overflow = "OverflowError: (34, 'Numerical result out of range')"
    expect(page.locator("#run-log-error")).to_contain_text(overflow)
    expect(page.locator("#run-alerts")).to_contain_text("Loss diverged")
    # A 1e303 loss is not "only a warning", and its message is not 300 digits long.
    assert "0000000000" not in page.locator("#run-alerts").text_content()
    expect(page.get_by_label("Log scale")).to_be_checked()  # spans 303 orders of magnitude
    expect(page.locator("#scale-note")).to_have_text("Log scale is on: loss spans 0.5 to 5e303.")
    # The y axis keeps short labels, decades of the log scale (it had none at all).
    plot = page.locator('figure.chart[data-key="loss"] .plot')
    expect(plot).to_have_attribute("data-y-ticks", re.compile(r"^1 1e\d+ 1e\d+ 1e\d+"))
    page.get_by_label("Log scale").uncheck()
    expect(plot).to_have_attribute("data-y-ticks", re.compile(r"^0 \de303 \de303"))
    expect(page.locator("#scale-note")).to_be_hidden()  # the person chose: no note
    page.get_by_label("Log scale").check()
    _both_widths(page, "run-diverged")


def test_a_running_runs_duration_ticks_on_its_page_and_in_the_list(site):
    url, page = site
    started = timezone.now() - timedelta(seconds=65)
    run = Run.objects.create(
        name="still training", command="true", status=RunStatus.RUNNING, started_at=started
    )
    Run.objects.create(name="long done", command="true", status=RunStatus.DONE, exit_code=0)
    page.goto(f"{url}/runs/{run.pk}/")
    duration = page.locator("#run-duration")
    expect(duration).to_have_text(re.compile(r"^1m 0[5-9]s$"))
    first = duration.text_content()
    expect(duration).not_to_have_text(first, timeout=3000)  # a second later, without a reload
    page.goto(f"{url}/runs/")
    cell = page.locator(f'tr[data-run="{run.pk}"] td.duration')
    first = cell.text_content()
    expect(cell).not_to_have_text(first, timeout=3000)
    _both_widths(page, "runs-list-ticking")


def test_the_runs_table_fits_a_phone(site):
    url, page = site
    for n in range(3):
        Run.objects.create(
            name=f"resnet-50 lr sweep {n}: warmup 500, cosine to zero, batch 256",
            command="true",
            status=RunStatus.DONE,
            exit_code=0,
        )
    page.set_viewport_size(PHONE)
    page.goto(f"{url}/runs/")
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    for label in ("Status", "Duration", "Exit", "Last loss"):
        cell = page.locator(f'td[data-label="{label}"]').first
        box = cell.bounding_box()
        assert box and box["x"] + box["width"] <= PHONE["width"], label  # not cut off
        # Each fact says what it is (the label is the cell's ::before: the header row is hidden).
        shown = "(el) => getComputedStyle(el, '::before').display"
        assert cell.evaluate(shown) == "block", label
    assert page.locator("table.runs thead").is_hidden()
    screenshot(page, "runs-list-phone")


def test_the_agents_page_shows_work_not_idle_chats(site):
    url, page = site
    for n, answering in enumerate((False, True)):
        session = ChatSession.objects.create(title="New chat")
        Agent.objects.create(
            id=f"orchestrator-chat{n}",
            role="orchestrator",
            cls_path=SESSION_AGENT,
            status="running",
            goal="Chat session: New chat",
            chat_session=session,
        )
        ChatSession.objects.filter(pk=session.pk).update(title=f"Tune the lr {n}")
        if answering:
            ChatTurn.objects.create(session=session, status=TurnStatus.RUNNING)
    page.goto(f"{url}/")
    expect(page.locator("#count-agents")).to_have_text("1")
    page.goto(f"{url}/agents/")
    tree = page.locator("#forest")
    expect(tree).to_contain_text("Chat: Tune the lr 1")
    expect(tree).not_to_contain_text("Tune the lr 0")
    expect(tree).not_to_contain_text("New chat")
    _both_widths(page, "agents")
    page.get_by_label("Show idle chats and ended trees").check()
    expect(page.locator("#agent-orchestrator-chat0 .pill").first).to_have_text("idle")
    screenshot(page, "agents-with-idle")
