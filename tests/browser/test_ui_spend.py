"""The Spend page (issue 38 §1) as a person sees it, at 1280 px and on a 390 px phone: a
chart of dollars a day, one line a model, with dates on its axis and every day of the range
on it (a day with nothing spent is $0, not a gap), and the table, nothing off to the side.
Its screenshots go to AGENTSYS_SHOTS (else test-artifacts/screenshots) for a person to look
at."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from ledger_app.models import SpendEntry
from ledger_app.services import record_llm_steps
from tests.chromium import ARTIFACTS

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _spend() -> None:
    """Two models over the last week, with two days on which nothing was spent."""
    now = timezone.now()
    for day, (model, usd) in enumerate(
        [("claude-sonnet", 1.2), ("gpt-5", 0.4), ("claude-sonnet", 2.5), ("gpt-5", 0.9)]
    ):
        key = f"prt_{model}_{day}"
        step = {"key": key, "usd": usd, "model": model, "input_tokens": 12000 * (day + 1)}
        record_llm_steps(steps=[step], chat_session_id="chat-1")
        ago = timedelta(days=2 * day)  # days 0, 2, 4, 6 ago: 1, 3, 5 have nothing
        SpendEntry.objects.filter(key=f"llm:{key}").update(created_at=now - ago)


def _save(page, name: str) -> Path:
    folder = Path(os.environ.get("AGENTSYS_SHOTS") or ARTIFACTS / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def test_the_spend_page_charts_dollars_a_day_by_date_and_fits_a_phone(site):
    url, page = site
    _spend()
    for width, height in ((1280, 900), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        page.goto(f"{url}/spend/?by=model")
        chart = page.locator("#spend-chart")
        expect(chart.locator("canvas")).to_have_count(1)
        _save(page, f"spend_{width}")  # before the checks: a failing page is looked at too
        # Every day from the first to today is a point of each line: 7 days x 2 models.
        expect(chart).to_have_attribute("data-points", "14")
        assert chart.get_attribute("data-nan") == "0"
        labels = chart.locator(".u-legend .u-series").all_inner_texts()
        assert any("claude-sonnet" in t for t in labels) and any("gpt-5" in t for t in labels)
        x_ticks = chart.get_attribute("data-x-ticks") or ""
        assert timezone.now().strftime("%b") in x_ticks, x_ticks  # dates, not day numbers
        expect(page.locator("#spend-table tbody tr")).to_have_count(2)
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        table = page.locator("#spend-table").locator("xpath=..")
        assert table.evaluate("w => w.scrollWidth <= w.clientWidth + 1")  # all of it in view


def test_a_first_days_spend_is_charted_over_a_week_with_its_dates(site):
    """A new user's first spend (the demo's, today): a week of days, six at $0, dated; not
    a lone point with no date under it."""
    url, page = site
    record_llm_steps(steps=[{"key": "prt_first", "usd": 0.02, "model": "demo"}])
    page.goto(f"{url}/spend/?by=model")
    chart = page.locator("#spend-chart")
    expect(chart.locator("canvas")).to_have_count(1)
    expect(chart).to_have_attribute("data-points", "7")
    assert timezone.now().strftime("%b") in (chart.get_attribute("data-x-ticks") or "")


def test_a_loop_at_its_cap_asks_for_approval_on_its_page_at_1280_and_390(site):
    """Issue 38 §2 as a person meets it: the loop's page says why it waits, what it spent of
    each cap, and takes more budget typed in; on a phone too, nothing off to the side."""
    from agents_app.models import Agent
    from memory_app.models import MemoryEntry
    from research_app.models import ResearchLoop

    url, page = site
    agent = Agent.objects.create(
        id="research-cap1", role="research", cls_path="x", project="p", status="running"
    )
    ResearchLoop.objects.create(
        agent=agent,
        goal="Find the learning rate with the lowest final loss",
        settings={"max_iterations": 5, "budget": {"gpu_hours": 0.5, "llm_usd": 2}},
        state={
            "phase": "iterating",
            "budget": {"gpu_hours": 0.5, "llm_usd": 2.0, "on_cap": "hold_runs"},
            "approval": {
                "kind": "cap",
                "reason": "its gpu_hours cap is reached: 0.51 spent of 0.5; it waits for "
                "your approval before its next experiments",
                "cap": {"gpu_hours": 0.5},
                "spent": {"gpu_hours": 0.51},
            },
        },
    )
    for width, height in ((1280, 900), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        page.goto(f"{url}/research/research-cap1/")
        card = page.locator("#loop-approval")
        expect(card).to_be_visible()
        _save(page, f"loop_approval_{width}")
        expect(card).to_contain_text("gpu_hours cap is reached: 0.51 spent of 0.5")
        expect(page.locator("#loop-status")).to_have_text("awaiting your approval (budget)")
        expect(page.locator("#loop-spent")).to_contain_text("of 0.5")  # spent beside its cap
        assert page.evaluate("document.documentElement.scrollWidth") <= width
    card.get_by_label("gpu_hours +").fill("1")
    card.get_by_role("button", name="Approve").click()
    expect(page.locator("ul.messages")).to_contain_text("Approved: the loop goes on.")
    entry = MemoryEntry.objects.get(target_id="research-cap1", tags=["approval"])
    assert entry.data["approve"] == {"gpu_hours": 1.0}
