"""Issue 24, part 4 in Chromium: two real runagentd daemons (gpu-a with 2 declared GPUs,
gpu-b with 4) and an old host that went away. The queue page shows a card per host with what
runs on each GPU, and why a 4-GPU run waits; when the run holding gpu-b ends elsewhere, the
page shows the waiting run taking gpu-b's GPUs without a reload. The overview's hosts strip
links to the cards. Screenshots at 1280 px and 390 px."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from hosts_app.models import Host, HostStatus
from scheduler_app.models import GPU, GPUSource, Run, RunStatus
from scheduler_app.runs import launch as runs
from scheduler_app.runs.launch import stop_run
from tests.chromium import off_the_page_thread, screenshot
from tests.helpers import launch_run, run_ended, wait_until
from tests.runtime_harness import DaemonProcess

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

A100, H100 = "NVIDIA A100-SXM4-40GB", "NVIDIA H100 80GB HBM3"
WAITS = (
    "No host with 4 free GPUs; largest has 1 free (gpu-a: 1 free of 2, gpu-b: 1 free of 4); "
    "kept for it: gpu-b frees 4 GPUs when its runs end"  # backfill, the default
)


@pytest.fixture
def two_hosts():
    started = [
        DaemonProcess("gpu-a", AGENTSYS_GPUS="2"),
        DaemonProcess("gpu-b", AGENTSYS_GPUS="4", AGENTSYS_HOST_LABELS="nvlink=true,zone=lab-2"),
    ]
    # Declared GPUs have no model or memory: name them as NVML would (registration only
    # writes these at a daemon's start; a heartbeat leaves them).
    GPU.objects.filter(host__name="gpu-a").update(
        name="NVIDIA A100-SXM4-40GB", memory_total_mb=40960
    )
    GPU.objects.filter(host__name="gpu-b").update(
        name="NVIDIA H100 80GB HBM3", memory_total_mb=81559
    )
    # Someone's notebook on gpu-a's GPU 1 (declared GPUs are not watched, so it stays).
    GPU.objects.filter(host__name="gpu-a", index=1).update(
        held_by_others=[{"pid": 31337, "name": "jupyter-kernel", "used_mb": 12288}]
    )
    old = Host.objects.create(
        name="gpu-old", status=HostStatus.DEAD, last_heartbeat=timezone.now(), daemon_pid=1
    )
    Host.objects.filter(pk=old.pk).update(last_heartbeat=timezone.now() - timedelta(hours=3))
    for index in range(2):
        GPU.objects.create(
            host=old,
            index=index,
            name="NVIDIA V100",
            memory_total_mb=16384,
            source=GPUSource.NVML,
            enabled=index == 0,
        )
    yield started
    for run in Run.objects.filter(status__in=RunStatus.open()):
        off_the_page_thread(stop_run, run_id=run.pk)
        run_ended(run)
    for daemon in started:
        if daemon.process.poll() is None:
            daemon.stop()


def _launch(tmp_path, name, gpus):
    run = launch_run(tmp_path, "sleep 120", gpu_required=gpus)
    Run.objects.filter(pk=run.pk).update(name=name)
    return run


def test_the_queue_shows_each_hosts_gpus_and_follows_a_gpu_freed(site, two_hosts, tmp_path):
    url, page = site
    vit = _launch(tmp_path, "vit-large lr=3e-4", 3)  # only gpu-b has 3
    wait_until(lambda: Run.objects.get(pk=vit.pk).status == RunStatus.RUNNING, 30)
    tokenizer = _launch(tmp_path, "tokenize corpus", 0)
    wait_until(lambda: Run.objects.get(pk=tokenizer.pk).status == RunStatus.RUNNING, 30)
    _launch(tmp_path, "llama-7b finetune", 4)

    page.goto(f"{url}/queue/")
    cards = page.locator("article.host-card")
    expect(cards).to_have_count(3)
    expect(cards.locator("h3")).to_have_text(["gpu-a", "gpu-b", "gpu-old"])  # online first
    b = page.locator("#host-gpu-b")
    expect(b.locator(".pill")).to_have_text("online")
    expect(b.locator(".host-count")).to_have_text("1 free of 4")
    expect(b.locator(".label-chip")).to_have_text(["nvlink=true", "zone=lab-2"])
    for index in range(3):
        expect(b.locator(f'li[data-gpu="{index}"] .holder a')).to_have_text("vit-large lr=3e-4")
    expect(b.locator('li[data-gpu="0"] .holder a')).to_have_attribute("href", f"/runs/{vit.pk}/")
    expect(b.locator('li[data-gpu="3"] .holder')).to_have_text("free")
    a = page.locator("#host-gpu-a")
    expect(a.locator('li[data-gpu="1"] .holder')).to_have_text(
        "held by others: jupyter-kernel (pid 31337, 12288 MB)"
    )
    expect(page.locator("#host-gpu-old .pill")).to_have_text("dead")
    expect(page.locator('#host-gpu-old li[data-gpu="1"] .holder')).to_have_text("disabled")
    expect(page.locator(".gpu-less a", has_text="tokenize corpus")).to_have_count(1)
    row = page.locator("table.queue tbody tr", has_text="llama-7b finetune")
    expect(row.locator("td.reason")).to_have_text(WAITS)
    screenshot(page, "queue-hosts")
    page.set_viewport_size({"width": 390, "height": 844})
    expect(row.locator("td.reason")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390  # no sideways scroll
    screenshot(page, "queue-hosts-390")
    page.set_viewport_size({"width": 1280, "height": 900})

    # vit ends elsewhere: gpu-b's four GPUs free, a daemon places llama there, and the open
    # page shows it (the agents feed) without a reload.
    off_the_page_thread(stop_run, run_id=vit.pk)
    for index in range(4):
        expect(b.locator(f'li[data-gpu="{index}"] .holder a')).to_have_text(
            "llama-7b finetune", timeout=20_000
        )
    expect(b.locator(".host-count")).to_have_text("0 free of 4")
    expect(page.locator("table.queue")).to_contain_text("Nothing waits")
    screenshot(page, "queue-hosts-placed")

    page.goto(f"{url}/")
    chip = page.locator('a.host-chip[data-host="gpu-b"]')
    expect(chip).to_contain_text("4 of 4 GPUs busy")
    expect(page.locator('a.host-chip[data-host="gpu-a"]')).to_contain_text("1 of 2 GPUs busy")
    screenshot(page, "overview-hosts")
    chip.click()
    expect(page).to_have_url(f"{url}/queue/#host-gpu-b")
    expect(page.locator("#host-gpu-b")).to_be_in_viewport()

    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{url}/")
    expect(page.locator("a.host-chip")).to_have_count(3)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    screenshot(page, "overview-hosts-390")


TRAIN = """\
import json, time
from pathlib import Path
lr = json.loads(Path("config.json").read_text())["lr"]
for step in range(8):
    print(f"step {step} lr {lr} loss {lr / (step + 1):.4f}", flush=True)
    time.sleep(0.1)
print("trained")
"""


def _git(repo, *args) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def test_a_run_on_another_host_shows_its_code_and_its_shipped_log(site, two_hosts, tmp_path):
    """The web (another host name than gpu-b's) shows the log gpu-b shipped, and the commit
    and uncommitted change gpu-b checked out: the workdir was moved away before it started."""
    url, page = site
    repo = tmp_path / "project"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "train.py").write_text(TRAIN)
    (repo / "config.json").write_text('{"lr": 0.1}\n')
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=ada", "-c", "user.email=a@lab", "commit", "-qm", "lr 0.1")
    (repo / "config.json").write_text('{"lr": 0.3}\n')
    run = runs.create_run(
        name="lr 0.3 on gpu-b",
        command=f"{sys.executable} train.py",
        workdir=str(repo),
        gpu_required=1,
        requires={"nvlink": True},
    )
    repo.rename(tmp_path / "moved-away")
    runs.start_run(run_id=run.pk)
    assert run_ended(run).status == RunStatus.DONE

    page.goto(f"{url}/runs/{run.pk}/")
    expect(page.locator("#log")).to_contain_text("step 7 lr 0.3 loss 0.0375")
    expect(page.locator("#run-code")).to_contain_text(run.code_commit[:12])
    expect(page.locator("#run-code")).to_contain_text("a checkout of this commit")
    page.locator("#run-patch summary").click()
    expect(page.locator("#run-patch pre")).to_contain_text('+{"lr": 0.3}')
    screenshot(page, "run-on-gpu-b")
    page.set_viewport_size({"width": 390, "height": 844})
    screenshot(page, "run-on-gpu-b-390")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
