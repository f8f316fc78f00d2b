"""A sweep's page in Chromium (issue 21), against daphne, runagentd and six real runs that
print `step N | loss X`: the page is open before the runs start and their rows fill in live;
sorting by a metric, filtering by status and by a metric's range, the chart and the table
highlighting each other under the pointer, a number leading to its run's chart, and the
columns chosen remembered. Screenshots at 1280 px and at phone width."""

from __future__ import annotations

import re
import sys

import pytest
from playwright.sync_api import expect

from scheduler_app.models import MetricSeries, Run, RunStatus, Sweep
from tests.chromium import screenshot
from tests.helpers import launch_run, run_ended

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
PY = sys.executable
# lr 1.0 diverges: its loss goes NaN and it exits 1 (the failed run of the sweep).
LRS = [0.001, 0.003, 0.01, 0.03, 0.1, 1.0]
TRAIN = """import math, sys, time
args = dict(a[2:].split("=", 1) for a in sys.argv[1:])
lr = float(args["lr"])
for step in range(1, 13):
    loss = math.nan if lr >= 1 and step > 4 else 1.0 / (1 + lr * 100 * step)
    print(f"step {step} | loss {loss}", flush=True)
    time.sleep(0.3)
sys.exit(1 if math.isnan(loss) else 0)
"""


def _cells(page, column: str) -> list[str]:
    cells = page.locator(f"#sweep-table tbody td:nth-child({_index(page, column)})")
    return cells.all_inner_texts()


def _index(page, column: str) -> int:
    ids = page.locator("#sweep-table thead tr:not(.groups) th").evaluate_all(
        "ths => ths.map(th => th.dataset.col)"
    )
    return ids.index(column) + 1


def test_a_sweeps_rows_fill_in_live_sort_filter_and_highlight_with_the_chart(
    site, daemon, tmp_path
):
    url, page = site
    sweep = Sweep.objects.create(name="lr sweep", goal="which lr trains fastest")
    (tmp_path / "train.py").write_text(TRAIN)
    page.goto(f"{url}/sweeps/{sweep.pk}/")
    expect(page.locator("#sweep-empty")).to_be_visible()
    expect(page.locator("#sweep-body")).to_be_hidden()
    page.evaluate("window.notReloaded = true")

    runs = [
        launch_run(
            tmp_path,
            f"{PY} train.py",
            sweep_id=sweep.pk,
            params={"lr": lr, "opt": "sgd" if lr < 0.01 else "adam"},
        )
        for lr in LRS
    ]
    rows = page.locator("#sweep-table tbody tr")
    expect(rows).to_have_count(6, timeout=30_000)  # the runs joined while the page was open
    loss_cells = page.locator("#sweep-table tbody a.metric")
    expect(loss_cells.first).to_be_visible(timeout=30_000)  # points logged, live
    screenshot(page, "sweep-table-live")
    for run in runs:
        run_ended(run, timeout=60)
    ended = {r.pk: r.status for r in Run.objects.filter(sweep=sweep)}
    assert sorted(ended.values()) == ["done"] * 5 + ["failed"], ended
    expect(page.locator("#sweep-table tbody .pill.running")).to_have_count(0, timeout=15_000)
    expect(page.locator("#sweep-table tbody .pill.failed")).to_have_count(1)
    expect(page.locator("#sweep-table tbody a.metric.nan").first).to_have_text("NaN")
    assert page.evaluate("window.notReloaded") is True

    # Sort by the last loss: a keyboard-usable header, said with aria-sort.
    header = page.locator('th[data-col="metric.loss.last"]')
    header.locator("button").click()
    expect(header).to_have_attribute("aria-sort", "ascending")
    expect(page).to_have_url(re.compile(r"sort=metric\.loss\.last"))
    last = _cells(page, "metric.loss.last")
    numbers = [float(v) for v in last if v != "NaN"]
    assert numbers == sorted(numbers) and last[-1] == "NaN", last  # NaN stays last
    header.locator("button").press("Enter")  # focus kept on the header: Enter sorts back
    expect(header).to_have_attribute("aria-sort", "descending")
    last = _cells(page, "metric.loss.last")
    numbers = [float(v) for v in last if v != "NaN"]
    assert numbers == sorted(numbers, reverse=True) and last[-1] == "NaN", last
    lr_best = _cells(page, "param.lr")[-2]
    assert lr_best == "0.1", lr_best  # the largest lr that did not diverge ends lowest

    # Filter: failed runs only, then a metric's range. Every status is offered.
    offered = page.locator("#status-filter input").evaluate_all("i => i.map(x => x.value)")
    assert offered == [s.value for s in RunStatus], offered
    page.get_by_label("failed", exact=True).check()
    expect(rows).to_have_count(1)
    expect(rows.first.locator(".pill")).to_have_text("failed")
    expect(page.locator("#table-range")).to_have_text("rows 1\u20131 of 1 (6 in the sweep)")
    page.get_by_label("failed", exact=True).uncheck()
    expect(rows).to_have_count(6)
    page.select_option("#filter-column", "metric.loss.last")
    page.fill("#filter-min", "0")
    page.fill("#filter-max", "0.2")
    page.click("#filter-add")
    kept = [v for v in numbers if 0 <= v <= 0.2]
    expect(rows).to_have_count(len(kept))
    expect(page.locator("#filter-chips")).to_contain_text("loss (last) 0 \u2013 0.2")
    assert "where=metric.loss.last%3Abetween%3A0%2C0.2" in page.locator("#csv-link").get_attribute(
        "href"
    )
    page.get_by_role("button", name=re.compile("Remove filter")).click()
    expect(rows).to_have_count(6)

    # The chart and the table, each highlighting the other under the pointer.
    run_id = rows.nth(2).get_attribute("data-run")
    point = page.locator(f'#sweep-svg path.hit[data-run="{run_id}"]').evaluate(
        """p => { const at = p.getPointAtLength(p.getTotalLength() * 0.5);
                  const m = p.getScreenCTM(); return [at.x * m.a + m.e, at.y * m.d + m.f]; }"""
    )
    page.mouse.move(*point)
    # Lines cross: the one under the pointer is the run whose row lights up.
    under = page.evaluate(
        "([x, y]) => document.elementFromPoint(x, y).closest('[data-run]').dataset.run", point
    )
    assert under in {r.pk for r in runs}
    lit = page.locator(f'#sweep-table tr[data-run="{under}"]')
    expect(lit).to_have_class(re.compile(r"\bhl\b"))
    expect(page.locator("#sweep-table tr.hl")).to_have_count(1)
    expect(page.locator("#chart-tip")).to_contain_text("lr")
    screenshot(page, "sweep-chart-hover")
    other = rows.nth(4)
    other.locator("td").nth(1).hover()
    other_id = other.get_attribute("data-run")
    line = page.locator(f'#sweep-svg path.line[data-run="{other_id}"]').get_attribute("d")
    expect(page.locator("#sweep-svg .overlay path.hl")).to_have_attribute("d", line)
    expect(page.locator("#sweep-svg")).to_have_class(re.compile(r"\bdim\b"))
    page.get_by_role("radio", name="Scatter").check()
    expect(page.locator("#sweep-svg circle.dot")).to_have_count(6)

    # Columns chosen stay chosen for this sweep; a number opens its run at its chart.
    page.locator("#columns-menu summary").click()
    page.locator('#columns-list input[data-col="metric.loss.max"]').uncheck()
    expect(page.locator('th[data-col="metric.loss.max"]')).to_have_count(0)
    page.reload()
    expect(rows).to_have_count(6)
    expect(page.locator('th[data-col="metric.loss.max"]')).to_have_count(0)
    expect(page.get_by_role("radio", name="Scatter")).to_be_checked()
    screenshot(page, "sweep-table-1280")
    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    expect(rows).to_have_count(6)
    # A phone: the chart first, then the params and the metric that matters, no sideways
    # scroll (tests/browser/test_ui_sweep_phone.py has the rest).
    wrap = page.locator(".sweep-table-wrap")
    assert wrap.evaluate("w => w.scrollWidth <= w.clientWidth + 1")
    chart_top = page.locator(".sweep-chart-card").bounding_box()["y"]
    assert chart_top < page.locator(".sweep-table-card").bounding_box()["y"]
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    screenshot(page, "sweep-table-390")
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{url}/sweeps/{sweep.pk}/?where=param.nope:eq:1")
    expect(page.locator("#table-error")).to_contain_text("no column 'param.nope'")
    page.click("#error-reset")
    expect(rows).to_have_count(6)
    link = rows.first.locator("a.metric").first
    href = link.get_attribute("href")
    assert re.fullmatch(r"/runs/run-[0-9a-f]+/#metric-loss", href), href
    link.click()
    expect(page.locator("figure#metric-loss")).to_have_class(re.compile(r"\btarget\b"))
    screenshot(page, "sweep-run-metric-target")
    page.goto(f"{url}/sweeps/")
    listed = page.locator(f'tr[data-sweep="{sweep.pk}"]')
    expect(listed.locator("td.num")).to_have_text("6")
    listed.get_by_role("link", name="lr sweep").click()
    expect(page).to_have_url(re.compile(rf"/sweeps/{sweep.pk}/"))
    page.go_back()
    screenshot(page, "sweeps-list")


def test_ten_thousand_runs_page_and_a_mixed_param_gets_categories(site):
    url, page = site
    sweep = Sweep.objects.create(name="big sweep")
    runs = Run.objects.bulk_create(
        Run(
            id=f"run-trial{i:05d}",  # bulk_create skips the retry on a random id's clash
            name=f"trial {i}",
            command="true",
            status="done",
            sweep=sweep,
            params={"batch": (32, 64, "auto", 128)[i % 4]},  # numbers and a string
        )
        for i in range(10_000)
    )
    MetricSeries.objects.bulk_create(
        MetricSeries(
            run=r,
            agent_id=f"executor-{i}",
            key="loss",
            points=1,
            last_step=1,
            last_value=1 / (i + 1),
            min_value=1 / (i + 1),
            max_value=1.0,
        )
        for i, r in enumerate(runs)
    )
    page.goto(f"{url}/sweeps/{sweep.pk}/")
    rows = page.locator("#sweep-table tbody tr")
    expect(page.locator("#table-range")).to_have_text("rows 1\u201350 of 10000")
    expect(rows).to_have_count(50)
    page.click("#page-next")
    expect(page.locator("#table-range")).to_have_text("rows 51\u2013100 of 10000")
    page.locator('th[data-col="param.batch"] button').click()  # numbers, then the strings
    expect(page.locator('th[data-col="param.batch"]')).to_have_attribute("aria-sort", "ascending")
    expect(page.locator("#table-range")).to_have_text("rows 1\u201350 of 10000")
    page.select_option("#page-size", "500")
    expect(rows).to_have_count(500)
    assert _cells(page, "param.batch")[-1] == "32"  # 2,500 of them come first
    # Where the numbers end and the string begins (a link keeps sort and page).
    page.goto(f"{url}/sweeps/{sweep.pk}/?sort=param.batch&offset=7250&limit=500")
    expect(page.locator("#table-range")).to_have_text("rows 7251\u20137750 of 10000")
    batch = _cells(page, "param.batch")
    assert batch[0] == "128" and batch[-1] == "auto", batch
    expect(page.locator("#sweep-svg text.tick.cat")).to_have_text(["auto"])  # its own place
    expect(page.locator("#sweep-svg path.line[data-run]")).to_have_count(500)
    screenshot(page, "sweep-10000-runs")


def test_runs_equal_but_for_their_seed_group_into_one_row_and_one_line(site):
    url, page = site
    sweep = Sweep.objects.create(name="seeded sweep")
    losses = {0.1: [0.5, 0.3], 0.01: [0.2, 0.25, None]}  # None: a seed still running
    for lr, values in losses.items():
        for seed, loss in enumerate(values, start=1):
            run = Run.objects.create(
                name=f"lr {lr} seed {seed}",
                command="true",
                status="done" if loss is not None else "running",
                sweep=sweep,
                params={"lr": lr, "seed": seed, "opt": "adam"},
            )
            MetricSeries.objects.create(
                run=run,
                agent_id=f"executor-{run.pk}",
                key="loss",
                points=10,
                last_step=10,
                last_value=0.1 if loss is None else loss,
                min_value=0.1 if loss is None else loss,
                max_value=2.0,
            )
    page.goto(f"{url}/sweeps/{sweep.pk}/")
    rows = page.locator("#sweep-table tbody tr:visible")
    expect(rows).to_have_count(5)  # one a run, until grouped
    page.get_by_label("Group by seed").check()
    expect(page).to_have_url(re.compile(r"group=seed"))
    expect(rows).to_have_count(2)
    expect(page.locator("#table-range")).to_have_text("groups 1\u20132 of 2 (5 runs)")
    header = page.locator('th[data-col="metric.loss.last"]')
    header.locator("button").click()  # groups by their mean: 0.225 (lr 0.01), then 0.4
    expect(header).to_have_attribute("aria-sort", "ascending")
    first, second = rows.nth(0), rows.nth(1)
    loss = _index(page, "metric.loss.last") - 1
    expect(first.locator("td").nth(loss)).to_have_text("0.225 ± 0.03536 n=2/3")
    expect(second.locator("td").nth(loss)).to_have_text("0.4 ± 0.1414 n=2/2")
    # Its seeds, and below, its runs, in the table's order: by their loss.
    expect(second.locator("td").nth(_index(page, "param.seed") - 1)).to_have_text("2, 1")
    expect(first.locator(".pill")).to_have_text(["1 running", "2 done"])
    # The chart: a line a group (no seed axis), a bar from min to max where n > 1.
    expect(page.locator("#sweep-svg path.line[data-run]")).to_have_count(2)  # not a hover's copy
    expect(page.locator("#sweep-svg line.spread[data-run]")).to_have_count(2)
    assert "param.seed" not in page.locator("#sweep-svg .axis-label").all_inner_texts()
    # One click shows the group's runs, each linking to its run's page.
    second.get_by_role("button", name="2 runs").click()
    expect(rows).to_have_count(4)
    members = page.locator(f'#sweep-table tr.member[data-of="{second.get_attribute("data-run")}"]')
    expect(members.locator("td.name a")).to_have_text(["lr 0.1 seed 2", "lr 0.1 seed 1"])
    href = members.first.locator("td.name a").get_attribute("href")
    assert re.fullmatch(r"/runs/run-[0-9a-f]+/", href), href
    page.mouse.move(0, 0)
    screenshot(page, "sweep-groups")
    page.reload()  # the grouping is in the link
    expect(rows).to_have_count(2)
    page.get_by_label("Group by seed").uncheck()
    expect(rows).to_have_count(5)


def test_a_run_a_stop_rule_ended_says_why_in_the_table_and_on_its_page(site):
    # Issue 39 §1: `stopped_by` beside the status pill, and on the run's page, at 1280 px and
    # at phone width (the rule's words wrap, they never widen the page).
    url, page = site
    sweep = Sweep.objects.create(name="stop rules", stop_when=[{"metric": "loss", "above": 2.0}])
    words = "loss > 2.0 after step 100: 3.71 at step 140"
    stopped = Run.objects.create(
        name="diverged", command="true", status="stopped", sweep=sweep, stopped_by=words
    )
    Run.objects.create(name="fine", command="true", status="done", sweep=sweep)
    page.goto(f"{url}/sweeps/{sweep.pk}/")
    expect(page.locator("#sweep-table tbody .stopped-by-cell")).to_have_text([words])
    screenshot(page, "sweep-stopped-by-rule")
    page.goto(f"{url}/runs/{stopped.pk}/")
    expect(page.locator("#run-stopped-by")).to_have_text(f"Stopped by its rule: {words}")
    screenshot(page, "run-stopped-by-rule")
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{url}/sweeps/{sweep.pk}/")
    expect(page.locator("#sweep-table tbody .stopped-by-cell")).to_be_visible()
    screenshot(page, "sweep-stopped-by-rule-phone")
    page.goto(f"{url}/runs/{stopped.pk}/")
    expect(page.locator("#run-stopped-by")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    screenshot(page, "run-stopped-by-rule-phone")
