"""A run whose script logs only with TensorBoard, and one that only prints, charted in
Chromium with their source named; what a source could not read is said on the page. Runs that
log to agent_metrics.jsonl, MLflow and W&B charted the same way, with their NaN alert."""

from __future__ import annotations

import shutil
import sys

import pytest
from playwright.sync_api import expect

from scheduler_app.models import RunStatus
from tests.chromium import screenshot
from tests.helpers import REPO, launch_run, run_ended
from tests.metric_source_scripts import CAPTIONS, command, run_env, write_scripts

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
PY = sys.executable
DEMO = REPO / "researchagent" / "demo_workspace"


def _done(run, timeout=60):
    run = run_ended(run, timeout=timeout)
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


def test_jsonl_mlflow_and_wandb_runs_are_charted_with_their_source_and_nan_alert(
    site, daemon, tmp_path
):
    url, page = site
    write_scripts(tmp_path)
    sources = ("jsonl", "mlflow", "wandb")
    # 60 steps of loss = 1/step, then a NaN at step 61 (tests/metric_source_scripts.py).
    launched = {
        s: launch_run(tmp_path, command(s, 60), executor_options=run_env(s)) for s in sources
    }
    for source, run in launched.items():
        run = _done(run, timeout=120)
        page.goto(f"{url}/runs/{run.pk}/")
        for key in ("loss", "acc"):
            chart = page.locator(f'figure.chart[data-key="{key}"]')
            expect(chart.locator("figcaption")).to_contain_text(CAPTIONS[source])
            expect(chart.locator("figcaption")).to_contain_text("61 points")
            expect(chart.locator(".plot canvas")).to_have_count(1)
        expect(page.locator("#run-alerts")).to_contain_text("NaN loss detected (step=61).")
        screenshot(page, f"run-{source}")
