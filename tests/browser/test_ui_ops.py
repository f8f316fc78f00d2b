"""The overview, GPU queue, alerts, memory and settings pages in Chromium (issue 12 items 2,
7-10), against daphne and a runagentd with one GPU: what each shows arrives live, and what a
person does there (cancel, answer, add, revoke) takes effect. Every page is screenshotted."""

from __future__ import annotations

import re
import sys

import pytest
from playwright.sync_api import expect

from accounts_app.models import ApiToken
from memory_app.models import MemoryEntry
from scheduler_app.models import Alert, AlertStatus, Run, RunStatus
from scheduler_app.runs.launch import stop_run
from tests.chromium import off_the_page_thread, screenshot
from tests.helpers import launch_run, run_ended, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _holder(tmp_path):
    """A run holding the only GPU until it is stopped. It logs four steady losses, then a
    high one when the file `spike` appears and a NaN when `nan` does: the executor in
    runagentd raises the alerts, as it would for a real training run."""
    script = tmp_path / "train.py"
    script.write_text(
        "import json, os, time\n"
        "out = os.path.join(os.environ['AGENTSYS_RUN_DIR'], 'agent_metrics.jsonl')\n"
        "def log(step, loss):\n"
        "    with open(out, 'a') as f:\n"
        "        f.write(json.dumps({'_step': step, 'loss': loss}) + '\\n')\n"
        "for step in range(4):\n"
        "    log(step, 1.0)\n"
        "for step, (trigger, loss) in enumerate([('spike', 50.0), ('nan', float('nan'))], 4):\n"
        "    while not os.path.exists(trigger):\n"
        "        time.sleep(0.1)\n"
        "    log(step, loss)\n"
        "time.sleep(120)\n"
    )
    run = launch_run(tmp_path, f"{sys.executable} {script}", gpu_required=1)
    wait_until(lambda: Run.objects.get(pk=run.pk).status == RunStatus.RUNNING, 30)
    Run.objects.filter(pk=run.pk).update(name="holder resnet")
    return run


def test_overview_and_queue_show_holders_waits_and_cancel_live(site, daemon, tmp_path):
    url, page = site
    holder = _holder(tmp_path)
    waiting = launch_run(tmp_path, "true", gpu_required=1)
    Run.objects.filter(pk=waiting.pk).update(name="waiting vit")

    page.goto(f"{url}/")
    expect(page.locator("#count-running")).to_have_text("1")
    expect(page.locator("#count-queued")).to_have_text("1")
    expect(page.locator('a.host-chip[data-host="ui-host"]')).to_contain_text("1 of 1 GPU busy")
    expect(page.get_by_text("no host with 1 free GPU; largest has 0 free")).to_be_visible()
    # No OpenCode in this test: the banner says so (from /api/health), and runagentd is up.
    banner = page.locator("#health-banner")
    expect(banner).to_contain_text("opencode: OPENCODE_URL is not set")
    expect(banner).not_to_contain_text("runagentd")
    # An alert raised now reaches the open page without a reload.
    (tmp_path / "spike").touch()
    expect(page.locator("#count-alerts")).not_to_have_text("0", timeout=20_000)
    expect(page.locator("ul.alerts")).to_contain_text("holder resnet")
    screenshot(page, "overview")

    page.goto(f"{url}/queue/")
    row = page.locator("table.queue tbody tr").first
    expect(row).to_contain_text("waiting vit")
    expect(row.locator("td.reason")).to_have_text(
        "No host with 1 free GPU; largest has 0 free (ui-host: 0 free of 1); "
        "kept for it: ui-host frees 1 GPU when its runs end"
    )
    expect(page.locator("li.gpu.busy")).to_contain_text("holder resnet")
    screenshot(page, "queue")
    page.once("dialog", lambda dialog: dialog.accept())
    row.get_by_role("button", name=re.compile("Cancel")).click()
    expect(page.locator(".messages")).to_contain_text("it left the queue")
    expect(page.locator("table.queue")).to_contain_text("Nothing waits")
    assert Run.objects.get(pk=waiting.pk).status == RunStatus.CANCELLED

    # The holder stopped elsewhere: the queue page frees GPU 0 by itself.
    off_the_page_thread(stop_run, run_id=holder.pk)
    assert run_ended(holder).status == RunStatus.STOPPED
    expect(page.locator("li.gpu.free")).to_contain_text("free", timeout=20_000)

    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{url}/")
    screenshot(page, "overview-phone")


def test_alerts_arrive_live_and_are_answered(site, daemon, tmp_path):
    url, page = site
    holder = _holder(tmp_path)
    page.goto(f"{url}/alerts/")
    expect(page.get_by_text("No open alerts")).to_be_visible()
    (tmp_path / "spike").touch()
    first = page.locator("li.alert-item").first
    expect(first).to_contain_text("50", timeout=20_000)  # live: no reload
    expect(first).to_contain_text("holder resnet")
    (tmp_path / "nan").touch()
    expect(page.locator("li.alert-item").first).to_contain_text("NaN", timeout=20_000)
    spike = Alert.objects.exclude(message__icontains="nan").order_by("created_at").first()
    nan = Alert.objects.get(message__icontains="nan")
    item = page.locator(f"#alert-{spike.pk}")
    screenshot(page, "alerts")

    item.get_by_role("button", name="Acknowledge").click()
    expect(page.locator(".messages")).to_contain_text("answered “acknowledge”")
    expect(page.locator(f"#alert-{spike.pk}")).to_have_count(0)  # the inbox shows open ones
    assert Alert.objects.get(pk=spike.pk).status == AlertStatus.RESOLVED
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator(f"#alert-{nan.pk}").get_by_role("button", name="Stop").click()
    expect(page.locator(".messages")).to_contain_text("stopped what raised it")
    assert run_ended(holder).status == RunStatus.STOPPED
    page.get_by_label("Show").select_option("all")
    expect(page.locator(f"#alert-{nan.pk}")).to_contain_text("by ada")


def test_memory_notes_search_and_deactivate(site):
    url, page = site
    page.goto(f"{url}/memory/")
    page.get_by_text("Add a note", exact=True).click()
    page.get_by_label("Title").fill("Warmup")
    page.get_by_label("Text").fill("Linear warmup for 500 steps stopped the early NaNs.")
    page.get_by_label("Tags (comma-separated)").fill("lr, stability")
    page.get_by_role("button", name="Save note").click()
    expect(page.locator(".messages")).to_contain_text("agents of")
    note = MemoryEntry.objects.get(data__title="Warmup")
    assert note.tags == ["lr", "stability"]
    entry = page.locator(f"#entry-{note.key}")
    expect(entry).to_contain_text("Linear warmup")

    page.get_by_label("Search").fill("no such words")
    expect(page.locator("#entries")).to_contain_text("No entries match")
    page.get_by_label("Search").fill("warmup")
    expect(entry).to_be_visible()
    screenshot(page, "memory")
    entry.get_by_role("button", name="Deactivate").click()
    expect(page.locator(".messages")).to_contain_text("hidden from prompts")
    assert not MemoryEntry.objects.get(pk=note.key).active


def test_settings_make_and_revoke_a_token(site):
    url, page = site
    page.goto(f"{url}/settings/")
    page.get_by_label("Name").fill("laptop scripts")
    page.get_by_role("button", name="Create token").click()
    token = page.locator("#new-token").input_value()
    assert token and ApiToken.objects.get(name="laptop scripts").active
    expect(page.locator("#opencode-status")).to_be_visible()
    screenshot(page, "settings")
    api = page.context.request
    assert api.get(f"{url}/api/runs", headers={"Authorization": f"Bearer {token}"}).ok
    page.goto(f"{url}/settings/")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Revoke laptop scripts").click()
    expect(page.locator(".messages")).to_contain_text("revoked")
    anonymous = page.context.browser.new_context()
    answer = anonymous.request.get(f"{url}/api/runs", headers={"Authorization": f"Bearer {token}"})
    assert answer.status == 401
    anonymous.close()


NAV = {
    "Overview": "/",
    "Chat": "/chat/",
    "Agents": "/agents/",
    "Research": "/research/",
    "Runs": "/runs/",
    "Queue": "/queue/",
    "Alerts": "/alerts/",
    "Memory": "/memory/",
    "Settings": "/settings/",
}


def test_every_page_opens_from_the_nav_without_script_errors(site, chromium):
    url, page = site
    errors = []
    page.on("pageerror", lambda error: errors.append(f"{page.url}: {error}"))

    def console(message):
        # /api/health and /api/models answer 503 while runagentd or OpenCode is down (here
        # neither runs): answers the pages show, which Chromium also logs as failed loads.
        if message.type == "error" and "Failed to load resource" not in message.text:
            errors.append(f"{page.url}: {message.text}")

    page.on("console", console)
    page.goto(f"{url}/")
    for name, path in NAV.items():
        page.get_by_role("navigation", name="Main").get_by_role("link", name=name).click()
        page.wait_for_url(f"{url}{path}")
        expect(page.locator("h1")).to_be_visible()
        link = page.get_by_role("navigation", name="Main").get_by_role("link", name=name)
        expect(link).to_have_attribute("aria-current", "page")
    page.goto(f"{url}/")
    page.get_by_role("button", name="New chat").click()  # a POST, from the overview
    page.wait_for_url(re.compile(r".*/chat/chat-[0-9a-f]+/$"))
    page.goto(f"{url}/chat/")
    screenshot(page, "chat-list")
    page.goto(f"{url}/research/")
    screenshot(page, "research-loops")
    # Keyboard: the first Tab reaches "Skip to content", which moves focus past the nav.
    page.keyboard.press("Tab")
    expect(page.get_by_role("link", name="Skip to content")).to_be_focused()
    assert not errors, errors

    visitor = chromium.new_context(viewport={"width": 1280, "height": 900})
    login = visitor.new_page()
    login.goto(f"{url}/queue/")
    expect(login.get_by_label("User name")).to_be_visible()  # every page needs login
    screenshot(login, "login")
    visitor.close()
