"""Budget defaults (issue 38 §2) as a person sets them, at 1280 px and on a 390 px phone:
the settings page's form saves a default and says so, a bad value is refused saying which
field with what was typed still there, and a chat's own default is set from under its title;
nothing runs off to the side. Screenshots go to AGENTSYS_SHOTS (else
test-artifacts/screenshots)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from accounts_app.selectors import default_budget
from sessions_app.models import ChatSession
from tests.chromium import ARTIFACTS

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _save(page, name: str) -> None:
    folder = Path(os.environ.get("AGENTSYS_SHOTS") or ARTIFACTS / "screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / f"{name}.png"), full_page=True)


def test_a_person_sets_a_default_budget_and_a_chat_its_own(site):
    url, page = site
    person = get_user_model().objects.get()
    for width, height in ((1280, 900), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        page.goto(f"{url}/settings/")
        form = page.locator("#budget-default")
        form.get_by_label("GPU hours").fill("-2")
        form.get_by_label("Model spend (USD)").fill("4")
        form.get_by_role("button", name="Save budget").click()
        expect(form.get_by_role("alert")).to_contain_text("GPU hours: Ensure this value")
        expect(form.get_by_label("Model spend (USD)")).to_have_value("4")
        _save(page, f"budget_default_refused_{width}")
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        form.get_by_label("GPU hours").fill("2")
        form.get_by_label("At a cap").select_option("stop_runs")
        form.get_by_role("button", name="Save budget").click()
        expect(page.locator("#budget-now")).to_have_text(
            "Model spend (USD) 4, GPU hours 2; at a cap stop_runs"
        )
        assert default_budget(person) == {"llm_usd": 4.0, "gpu_hours": 2.0, "on_cap": "stop_runs"}

        chat = ChatSession.objects.create(title=f"budget {width}", owner=person)
        page.goto(f"{url}/chat/{chat.pk}/")
        expect(page.locator("#chat-budget-now")).to_have_text("none")
        page.locator("#chat-budget summary").click()
        page.locator("#chat-budget-form").get_by_label("Wall-clock hours").fill("6")
        _save(page, f"budget_chat_{width}")
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        page.locator("#chat-budget-form").get_by_role("button", name="Save budget").click()
        expect(page.locator("#chat-budget-now")).to_have_text(
            "Wall-clock hours 6; at a cap hold_runs"
        )
        expect(page.locator("#message")).to_be_visible()  # the composer is still on screen
        chat.refresh_from_db()
        assert chat.default_budget == {"wall_hours": 6.0, "on_cap": "hold_runs"}
