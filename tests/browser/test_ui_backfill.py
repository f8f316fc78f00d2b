"""Backfill on the queue page, in Chromium (issue 40 §1): with two real runagentd daemons, the
2-GPU run at the head says which host's GPUs are kept for it and when, the run behind it
whose time limit ends after that says it would delay them, and the short run that started
ahead says why, with each placed run's time limit. Screenshots at 1280 px and 390 px."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from agentsys.backfill import clock
from tests.chromium import screenshot
from tests.integration.test_backfill import _request, _running, _start
from tests.integration.test_backfill import two_hosts as two_hosts  # the fixture
from tests.integration.test_hosts_placement import _until_flag

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_the_queue_page_says_what_is_kept_for_the_head_and_why_others_wait(site, two_hosts):
    url, page = site
    workdir = two_hosts
    flag = _until_flag(workdir / "release")
    holder = _start("holder-a", workdir, limit=600, zone="a", command=flag)
    other = _start("holder-b", workdir, limit=3600, zone="b", command=flag)
    holder, _ = _running(holder), _running(other)
    _start("llama-70b finetune", workdir, gpus=2)
    _start("long eval", workdir, limit=3600, zone="a", command=flag)
    at = clock(_request(holder).started_at.timestamp() + 600)

    page.goto(f"{url}/queue/")
    waiting = page.locator("table.queue tbody tr")
    head = waiting.filter(has_text="llama-70b finetune").locator("td.reason")
    expect(head).to_contain_text(f"kept for it: bf-a frees 2 GPUs at {at}")
    # bf-a has a GPU free, but the long run would still hold it when the head is due.
    expect(waiting.filter(has_text="long eval").locator("td.reason")).to_have_text(
        f"Would delay the reservation (bf-a frees 2 GPUs at {at}); its time limit ends after that"
    )
    short = _running(_start("short probe", workdir, limit=300, zone="a", command=flag))
    page.reload()
    placed = page.locator("table.placed tbody tr", has_text="short probe")
    expect(placed.locator(".placement-note")).to_have_text(
        f"Backfilled: ends before bf-a frees 2 GPUs at {at}"
    )
    ends = clock(_request(short).started_at.timestamp() + 300)
    expect(placed.locator("td").last).to_have_text(re.compile(re.escape(ends)))
    screenshot(page, "queue-backfill")
    page.set_viewport_size({"width": 390, "height": 844})
    expect(head).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390  # no sideways scroll
    screenshot(page, "queue-backfill-390")
    (workdir / "release").touch()
