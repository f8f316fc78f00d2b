"""A run whose script logs only with TensorBoard, and one that only prints, charted in
Chromium with their source named; what a source could not read is said on the page."""

from __future__ import annotations

import shutil
import sys

import pytest
from playwright.sync_api import expect

from scheduler_app.models import RunStatus
from tests.chromium import screenshot
from tests.helpers import REPO, launch_run, run_ended

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
PY = sys.executable
DEMO = REPO / "config" / "demo_workspace"


def _done(run):
    run = run_ended(run, timeout=60)
    assert run.status == RunStatus.DONE, run.error
    return run


def test_tensorboard_and_printed_metrics_are_charted_with_their_source(site, daemon, tmp_path):
    url, page = site
    for script in ("train_tensorboard.py", "train_prints.py"):
        shutil.copy(DEMO / script, tmp_path / script)
    tb = _done(launch_run(tmp_path, f"{PY} train_tensorboard.py --steps 200 --sleep 0.005"))
    printed = _done(
        launch_run(
            tmp_path,
            f"{PY} -c \"print('x' * 100_000)\"; {PY} train_prints.py --steps 200 --sleep 0.002",
        )
    )
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{url}/runs/{tb.pk}/")
    loss = page.locator('figure.chart[data-key="loss"]')
    expect(loss.locator("figcaption")).to_contain_text("from TensorBoard")
    expect(loss.locator(".plot canvas")).to_have_count(1)
    screenshot(page, "run-tensorboard")
    page.goto(f"{url}/runs/{printed.pk}/")
    expect(page.locator('figure.chart[data-key="loss"] figcaption')).to_contain_text(
        "from printed lines"
    )
    expect(page.locator("#metric-problems")).to_contain_text("stdout:")
    screenshot(page, "run-printed-metrics")
    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    expect(page.locator("#metric-problems")).to_be_visible()
    screenshot(page, "run-printed-metrics-390")
