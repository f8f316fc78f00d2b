"""Issue 22: the queue page and a run's page in Chromium while SLURM holds a run's job. Two
runs take both GPUs of the real test cluster (tests/slurm_cluster.py); the third waits in
SLURM's queue, shown with SLURM's reason, and the page follows it to running."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from agentsys.slurm import client as slurm
from scheduler_app.models import Run, RunStatus
from tests.chromium import screenshot
from tests.helpers import launch_run, run_ended, wait_until
from tests.runtime_harness import DaemonProcess
from tests.slurm_cluster import bring_up_slurm

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def gpu_run(release) -> str:
    """A run that holds its GPU until the test creates `release` (a fixed sleep ended the first
    two before a busy machine had loaded the third's page: it ran, no longer waiting)."""
    return f'echo "gpus=$CUDA_VISIBLE_DEVICES"; while [ ! -e {release} ]; do sleep 0.2; done'


@pytest.fixture
def slurm_daemon():
    bring_up_slurm()
    started = DaemonProcess("slurm-ui", AGENTSYS_SLURM="on", AGENTSYS_GPUS="")
    yield started
    if started.process.poll() is None:
        started.stop()
    for job_id in Run.objects.exclude(slurm_job_id=None).values_list("slurm_job_id", flat=True):
        slurm.cancel(job_id)


def _slurm_run(tmp_path, name, release):
    run = launch_run(
        tmp_path, gpu_run(release), gpu_required=1, executor_options={"backend": "slurm"}
    )
    Run.objects.filter(pk=run.pk).update(name=name)
    return run


def test_a_run_waiting_in_slurms_queue_shows_slurms_reason(site, slurm_daemon, tmp_path):
    url, page = site
    release_ab, release_c = tmp_path / "release-ab", tmp_path / "release-c"
    first = _slurm_run(tmp_path, "gpu run A", release_ab)
    second = _slurm_run(tmp_path, "gpu run B", release_ab)
    for run in (first, second):
        wait_until(
            lambda run=run: Run.objects.get(pk=run.pk).status == RunStatus.RUNNING,
            30,
            message="the first two to run",
        )
    third = _slurm_run(tmp_path, "gpu run C", release_c)
    wait_until(
        lambda: Run.objects.get(pk=third.pk).wait_reason == "Resources",
        30,
        message="the third to wait for resources",
    )
    job = Run.objects.get(pk=third.pk).slurm_job_id

    page.goto(f"{url}/queue/")
    row = page.locator(f'tr[data-slurm-job="{job}"]')
    expect(row).to_contain_text("gpu run C")
    expect(row.locator(".reason")).to_have_text("In SLURM's queue: Resources")
    expect(page.locator("#h-placed")).to_contain_text("2 running")
    first_job = Run.objects.get(pk=first.pk).slurm_job_id
    expect(page.locator("table.runs").last).to_contain_text(f"SLURM job {first_job}")
    screenshot(page, "queue-slurm-waiting")

    page.goto(f"{url}/runs/{third.pk}/")
    expect(page.locator("#run-slurm")).to_have_text(f"{job} · waits: Resources")
    expect(page.locator("#run-status")).to_have_text("queued")
    screenshot(page, "run-slurm-waiting")
    # Live: the page follows the job to running, then done, without a reload.
    release_ab.touch()
    expect(page.locator("#run-status")).to_have_text("running", timeout=30_000)
    release_c.touch()
    assert run_ended(third, timeout=60).status == RunStatus.DONE
    expect(page.locator("#run-status")).to_have_text("done", timeout=20_000)

    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{url}/queue/")
    expect(page.locator("#h-placed")).to_be_visible()
    screenshot(page, "queue-slurm-390")
