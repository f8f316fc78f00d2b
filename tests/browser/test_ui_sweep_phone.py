"""A sweep's table on a phone (issue 34): at 390 px the chart comes first, and the table shows
each run's name, the metric it is sorted by (else the chart's) beside it, then its params,
with no sideways scroll to find them; a line says where the other columns are. At 1280 px every
column chosen is there."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from scheduler_app.models import MetricSeries, Run, Sweep
from tests.browser.test_ui_reading import shot

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _sweep() -> Sweep:
    sweep = Sweep.objects.create(name="lr sweep", goal="which lr and batch train fastest")
    for i, (lr, batch) in enumerate([(0.001, 32), (0.01, 64), (0.1, 32), (1.0, 64)]):
        run = Run.objects.create(
            name=f"lr {lr} batch {batch}",
            command="python train.py",
            status="done" if i < 3 else "failed",
            sweep=sweep,
            params={"lr": lr, "batch": batch},
        )
        for key, last in (("loss", 1 / (i + 2)), ("accuracy", 0.5 + i / 10)):
            MetricSeries.objects.create(
                run=run,
                agent_id=f"executor-{i}",
                key=key,
                points=10,
                last_step=10,
                last_value=last,
                min_value=last / 2,
                max_value=last * 2,
            )
    return sweep


def _columns(page) -> list[str]:
    return page.locator("#sweep-table thead tr:not(.groups) th").evaluate_all(
        "ths => ths.map(th => th.dataset.col)"
    )


def test_on_a_phone_the_chart_comes_first_and_the_table_fits_what_matters(site):
    url, page = site
    sweep = _sweep()
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{url}/sweeps/{sweep.pk}/")
    rows = page.locator("#sweep-table tbody tr")
    expect(rows).to_have_count(4)
    chart = page.locator(".sweep-chart-card").bounding_box()
    assert chart["y"] < page.locator(".sweep-table-card").bounding_box()["y"]
    assert _columns(page) == ["name", "metric.loss.last", "param.batch", "param.lr"]
    wrap = page.locator(".sweep-table-wrap")
    assert wrap.evaluate("w => w.scrollWidth <= w.clientWidth + 1")  # nothing off to the side
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    note = page.locator("#phone-note")
    expect(note).to_contain_text("each run's loss (last) and params")
    expect(note).to_contain_text("in the CSV")
    shot(page, "sweep-table-phone")

    # Sorted by another metric: that one is the column shown.
    page.goto(f"{url}/sweeps/{sweep.pk}/?sort=-metric.accuracy.max")
    expect(rows).to_have_count(4)
    assert _columns(page)[1] == "metric.accuracy.max"
    expect(rows.first).to_contain_text("lr 1.0 batch 64")

    # Params too many for the width: they scroll, the metric beside the name does not.
    wide = Sweep.objects.create(name="five params")
    for i in range(3):
        run = Run.objects.create(
            name=f"refine at learning rate {i} with warmup",
            command="python train.py",
            sweep=wide,
            params={"lr": 0.1 * i, "seed": 1000 + i, "steps": 15000, "warmup": 500, "wd": 0.01}
            if i
            else {"lr": 0.0},  # a run that sets fewer params is drawn all the same
        )
        MetricSeries.objects.create(
            run=run, agent_id=f"x-{i}", key="loss", points=1, last_step=1, last_value=0.5 + i
        )
    page.goto(f"{url}/sweeps/{wide.pk}/")
    expect(rows).to_have_count(3)
    expect(note).to_contain_text("Scroll the table sideways for the rest of the params")
    metric = page.locator('#sweep-table th[data-col="metric.loss.last"]').bounding_box()
    assert metric["x"] + metric["width"] <= 390, metric
    lines = page.locator(".sweep-chart path.line[data-run]")  # not a hover's copy
    expect(lines).to_have_count(3)
    # Each a line from axis to axis (a path of lone points draws nothing).
    assert lines.evaluate_all("ps => ps.every(p => !/M[^L]*M/.test(p.getAttribute('d')))")

    # A wide screen has every column again, and no phone line.
    page.goto(f"{url}/sweeps/{sweep.pk}/?sort=-metric.accuracy.max")
    page.set_viewport_size({"width": 1280, "height": 900})
    expect(page.locator('th[data-col="status"]')).to_have_count(1)
    assert {"metric.loss.min", "duration_s"} <= set(_columns(page))
    expect(note).to_be_hidden()
