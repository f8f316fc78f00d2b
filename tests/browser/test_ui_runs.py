"""The runs pages in Chromium (issue 12 item 6), against daphne, runagentd and real runs: a
run's log lines and chart points arrive live; two runs overlay on one chart; a queued run is
cancelled from its page. Every page visited is saved as a screenshot."""

from __future__ import annotations

import re
import sys

import pytest
from playwright.sync_api import expect

from agents_app.models import Agent
from hosts_app.models import Host
from scheduler_app.metrics.series import record_rows
from scheduler_app.models import Run, RunStatus, ScheduleRequest
from tests.chromium import screenshot
from tests.helpers import launch_run, run_ended, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
PY = sys.executable


def _trainer(tmp_path, steps: int, pause: float) -> str:
    """A script that logs a line and a metrics row per step, until told to stop early."""
    script = tmp_path / "train.py"
    script.write_text(
        "import json, math, os, sys, time\n"
        "out = os.path.join(os.environ['AGENTSYS_RUN_DIR'], 'agent_metrics.jsonl')\n"
        f"for step in range({steps}):\n"
        "    loss = float('nan') if step == 3 else 2.0 / (step + 1)\n"
        "    print(f'step {step} loss {loss}', flush=True)\n"
        "    with open(out, 'a') as f:\n"
        "        f.write(json.dumps({'_step': step, 'loss': loss, 'lr': 0.1}) + '\\n')\n"
        f"    time.sleep({pause})\n"
    )
    return f"{PY} {script}"


def test_a_run_page_shows_log_lines_and_chart_points_as_they_arrive(site, daemon, tmp_path):
    url, page = site
    run = launch_run(tmp_path, _trainer(tmp_path, steps=40, pause=0.25), gpu_required=1)
    wait_until(lambda: Run.objects.get(pk=run.pk).status == RunStatus.RUNNING, 30)
    page.goto(f"{url}/runs/")
    row = page.locator(f'tr[data-run="{run.pk}"]')
    expect(row.locator(".pill")).to_have_text("running")
    # Live, from events: the executor reads the metrics every 3 s, later on a loaded machine.
    expect(row.locator("td.loss")).to_have_text(re.compile(r"^0\.\d+$"), timeout=15_000)
    screenshot(page, "runs-list")

    page.goto(f"{url}/runs/{run.pk}/")
    log = page.locator("#log")
    expect(log).to_contain_text("step 1 loss")
    chart = 'figure.chart[data-key="loss"] .plot'
    first_points = wait_for_points(page, chart, 1)
    # Lines and points written after the page opened appear without a reload.
    expect(log).to_contain_text("step 30 loss", timeout=30_000)
    wait_for_points(page, chart, first_points + 10, timeout=30_000)
    loss_chart = page.locator(chart)
    expect(loss_chart).to_have_attribute("data-nan", "1")  # step 3's NaN, marked
    expect(page.locator("#run-alerts")).to_contain_text("NaN loss detected (step=3)")
    expect(page.locator("#run-status")).to_have_text("done", timeout=30_000)
    expect(page.get_by_role("button", name="Rerun")).to_be_visible()  # Stop is gone
    expect(page.locator("#run-exit")).to_have_text("0")
    expect(loss_chart).to_have_attribute("data-points", "40", timeout=10_000)
    expect(log).to_contain_text("step 39 loss")
    screenshot(page, "run-page")
    page.set_viewport_size({"width": 390, "height": 844})
    screenshot(page, "run-page-phone")


def wait_for_points(page, selector: str, at_least: int, timeout: float = 15_000) -> int:
    """Wait until the chart at `selector` draws at least this many points; returns them."""
    page.wait_for_function(
        "([sel, n]) => Number(document.querySelector(sel)?.dataset.points) >= n",
        arg=[selector, at_least],
        timeout=timeout,
    )
    return int(page.locator(selector).get_attribute("data-points"))


def test_two_runs_overlay_on_one_chart(site):
    url, page = site
    runs = [
        Run.objects.create(name=f"lr {lr}", command="true", status=RunStatus.DONE)
        for lr in (0.1, 0.01)
    ]
    for scale, run in zip((1.0, 2.0), runs, strict=True):
        rows = [{"_step": s, "loss": scale / (s + 1)} for s in range(100)]
        record_rows(agent_id=f"executor-{run.pk}", run_id=run.pk, rows=rows)
    page.goto(f"{url}/runs/")
    for run in runs:
        page.get_by_label(f"Compare {run.name}").check()
    page.get_by_role("button", name="Compare selected").click()
    chart = page.locator("#compare-chart .plot")
    expect(chart).to_have_attribute("data-points", "200")
    legend = page.locator("#compare-chart .u-legend")
    for run in runs:
        expect(legend).to_contain_text(run.name)
    screenshot(page, "compare")


def test_a_hosts_name_stays_on_one_line_in_the_runs_list(site):
    # Seen from outside: "gpu-c" broke after its hyphen, one letter on a line of its own.
    url, page = site
    host = Host.objects.create(name="gpu-node-c")
    agent = Agent.objects.create(id="executor-wrap", role="executor", cls_path="x", project="p")
    ScheduleRequest.objects.create(
        id="sched-wrap", agent=agent, agent_cls_path="x", host=host, status="done", gpu_indices=[0]
    )
    Run.objects.create(
        name="show metrics logged as TensorBoard event files (not compared)",
        command="true",
        status=RunStatus.DONE,
        agent=agent,
    )
    page.goto(f"{url}/runs/")
    name = page.locator('td[data-label="Host"] bdi')
    expect(name).to_have_text("gpu-node-c")
    line = page.evaluate(
        "e => parseFloat(getComputedStyle(e).lineHeight) || e.getClientRects()[0].height",
        name.element_handle(),
    )
    assert name.bounding_box()["height"] < 1.5 * line, "the host's name wrapped"
    screenshot(page, "runs-host")


def test_a_queued_run_is_cancelled_from_its_page(site, daemon, tmp_path):
    url, page = site
    holder = launch_run(tmp_path, _trainer(tmp_path, steps=400, pause=0.1), gpu_required=1)
    wait_until(lambda: Run.objects.get(pk=holder.pk).status == RunStatus.RUNNING, 30)
    waiting = launch_run(tmp_path, "true", gpu_required=1)  # the only GPU is taken
    assert Run.objects.get(pk=waiting.pk).status == RunStatus.QUEUED
    page.goto(f"{url}/runs/{waiting.pk}/")
    # Nothing printed yet: a line that says so, not a tall empty box.
    expect(page.locator("#log-size")).to_have_text("The log is empty so far.")
    assert page.locator("#log").bounding_box()["height"] < 100
    assert "No output yet" in page.locator("#log").evaluate(
        "log => getComputedStyle(log, '::before').content"
    )
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Cancel").click()
    expect(page.locator("#run-status")).to_have_text("cancelled")
    expect(page.locator(".messages")).to_contain_text("Cancelled")
    assert Run.objects.get(pk=waiting.pk).status == RunStatus.CANCELLED
    screenshot(page, "run-cancelled")
    page.goto(f"{url}/runs/{holder.pk}/")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Stop").click()
    assert run_ended(holder).status == RunStatus.STOPPED


def test_a_long_log_opens_at_its_tail_and_pages_back(site, tmp_path):
    url, page = site
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    lines = [f"line {i:06d} " + "x" * 90 for i in range(20_000)]  # ~2 MB
    (run_dir / "run.log").write_text("\n".join(lines) + "\n")
    run = Run.objects.create(
        name="long log", command="true", status=RunStatus.DONE, run_dir=str(run_dir)
    )
    page.goto(f"{url}/runs/{run.pk}/")
    log = page.locator("#log")
    expect(log).to_contain_text("line 019999")
    assert "line 000000" not in log.text_content()  # never loaded whole
    expect(page.locator("#log-size")).to_contain_text("showing 64 KiB of")
    page.get_by_role("button", name="Load earlier").click()
    expect(page.locator("#log-size")).to_contain_text("showing 128 KiB of")
    assert log.text_content().count("\n") > 1000
    page.get_by_label("Log scale").check()  # no chart to redraw: nothing breaks
    screenshot(page, "run-long-log")
