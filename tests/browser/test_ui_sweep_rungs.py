"""A sweep's early stopping as a person sees it (issue 39 §2): the rungs card on the sweep page
says how many runs reached each rung, went on and were stopped, with the cut-off, a strip of
dots a rung (each a run, linking to it), the GPU-hours saved, and the runs by the furthest rung
they reached; a stopped run's page says which rung stopped it. At 1280 and 390 px."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from scheduler_app.models import Run, RunStatus, Sweep
from scheduler_app.sweeps.rungs import judge
from tests.browser.test_ui_reading import shot

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ASHA = {"type": "asha", "metric": "loss", "mode": "min", "grace_steps": 1, "reduction": 3}


def _sweep() -> Sweep:
    """Nine runs judged one after the other, as the hand computation of tests/unit/test_asha.py:
    losses 5 3 8 1 9 2 7 4 6; 8, 9, 7, 4 and 6 stopped at step 1."""
    sweep = Sweep.objects.create(name="lr by ASHA", early_stop={**ASHA, "max_steps": 27})
    started = timezone.now() - timedelta(minutes=10)
    for loss in (5, 3, 8, 1, 9, 2, 7, 4, 6):
        run = Run.objects.create(
            name=f"lr {loss / 100:g}",
            command="python train.py",
            status=RunStatus.RUNNING,
            sweep=sweep,
            params={"lr": loss / 100},
            gpu_required=1,
            started_at=started,
        )
        for rung in (1, 3, 9):
            judged = judge(run_id=run.pk, rung=rung, value=float(loss), step=rung)
            if not judged.keep:
                Run.objects.filter(pk=run.pk).update(
                    status=RunStatus.STOPPED,
                    stopped_by=judged.words,
                    finished_at=started + timedelta(seconds=30),
                )
                break
        else:
            Run.objects.filter(pk=run.pk).update(
                status=RunStatus.DONE, finished_at=started + timedelta(minutes=5)
            )
    return sweep


def test_the_rungs_card_says_who_went_on_and_what_was_saved(site):
    url, page = site
    sweep = _sweep()
    page.goto(f"{url}/sweeps/{sweep.pk}/")
    card = page.locator("#sweep-rungs")
    expect(card).to_contain_text("5 runs stopped early")
    # Five runs stopped at step 1 after 30 s, each of 27 steps: 30 s times 26 per run, 1 GPU.
    expect(page.locator("#rungs-saved")).to_contain_text("saved ≈ 1.08 GPU-hours")
    first = card.locator(".rung[data-rung='1']")
    expect(first).to_contain_text("9 reached · 4 went on · 5 stopped")
    expect(first.locator(".rung-dot")).to_have_count(9)
    expect(first.locator(".rung-dot.cut")).to_have_count(5)
    expect(card.locator(".rung[data-rung='9'] .rung-dot.kept")).to_have_count(4)
    expect(card.locator(".rung")).to_have_count(3)
    assert not card.get_attribute("hx-get")  # nothing running: no refresh

    card.locator(".rung-runs summary").click()
    rows = card.locator(".rung-runs tbody tr")
    expect(rows).to_have_count(9)
    expect(rows.first).to_contain_text("9")  # those that went furthest first
    shot(page, "sweep-rungs")
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    # In the runs table, why a run stopped wraps inside its status cell, not over the next.
    said = page.locator("#sweep-table .stopped-by-cell:visible").first
    expect(said).to_contain_text("ASHA rung 1:")
    assert said.evaluate("e => e.scrollWidth <= e.clientWidth + 1")  # no text past its box
    right, cell_right = said.evaluate(
        "e => [e.getBoundingClientRect().right, e.closest('td').getBoundingClientRect().right]"
    )
    assert right <= cell_right + 1

    page.set_viewport_size({"width": 390, "height": 844})
    expect(first.locator(".rung-dot")).to_have_count(9)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    strip = first.locator(".rung-strip").bounding_box()
    assert strip["width"] > 250  # the strip keeps the phone's width

    page.set_viewport_size({"width": 1280, "height": 900})
    first.locator(".rung-dot.cut").first.click()  # a stopped run: its page says why
    expect(page.locator("#run-status")).to_have_text("stopped")
    said = page.locator("#run-stopped-by")
    expect(said).to_contain_text("Stopped by its sweep's early stopping (its rungs): ASHA rung 1:")
    expect(said).to_contain_text("loss 8 not in the top 1/3 of the 3 runs there (> cut-off 3.6")
    shot(page, "run-stopped-by-asha")


def test_a_running_sweep_refreshes_its_rungs(site):
    url, page = site
    sweep = Sweep.objects.create(name="going", early_stop={**ASHA, "max_steps": 9})
    run = Run.objects.create(name="a", command="x", status=RunStatus.RUNNING, sweep=sweep)
    page.goto(f"{url}/sweeps/{sweep.pk}/")
    card = page.locator("#sweep-rungs")
    expect(card).to_contain_text("No run stopped yet")
    assert card.get_attribute("hx-trigger") == "every 5s"
    judge(run_id=run.pk, rung=1, value=0.5, step=1)
    expect(card.locator(".rung[data-rung='1']")).to_contain_text("1 reached", timeout=12_000)
