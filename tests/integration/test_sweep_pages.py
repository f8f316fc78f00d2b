"""The sweep pages as Django renders them (the browser test drives them live): login needed,
a missing sweep is a 404 page, the list links each sweep with its run count, a sweep's page is
the shell its script fills, and a research loop's "compare its runs" leads there."""

import pytest

from scheduler_app.metrics.series import record_rows
from scheduler_app.models import Run, RunStatus, Sweep, SweepKind

pytestmark = pytest.mark.django_db


def test_pages_need_login(client):
    sweep = Sweep.objects.create(name="lr sweep")
    for url in ("/sweeps/", f"/sweeps/{sweep.pk}/"):
        response = client.get(url)
        assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_the_list_shows_each_sweep_with_its_runs(browser):
    empty = browser.get("/sweeps/").content.decode()
    assert "No sweeps yet" in empty and 'aria-current="page">Sweeps<' in empty
    sweep = Sweep.objects.create(name="lr sweep", kind=SweepKind.RESEARCH)
    for i in range(3):
        Run.objects.create(name=f"r{i}", command="true", sweep=sweep)
    Sweep.objects.create(name="nothing yet")
    page = browser.get("/sweeps/").content.decode()
    assert f'href="/sweeps/{sweep.pk}/"' in page and "lr sweep" in page
    assert "Research loop" in page and ">3</td>" in page and "nothing yet" in page


def test_a_sweep_page_and_a_missing_one(browser):
    sweep = Sweep.objects.create(name="lr sweep", goal="find the best lr")
    page = browser.get(f"/sweeps/{sweep.pk}/").content.decode()
    assert "lr sweep" in page and "find the best lr" in page
    assert f'data-sweep="{sweep.pk}"' in page and "js/sweep_table" in page
    # The status filter offers every status a run can be in (ready and rejected too).
    assert f'data-statuses="{",".join(RunStatus.values)}"' in page and "rejected" in page
    assert "No runs in this sweep yet" in page  # shown until a run joins
    assert 'id="sweep-empty" hidden' not in page
    run = Run.objects.create(name="r", command="true", sweep=sweep)
    page = browser.get(f"/sweeps/{sweep.pk}/").content.decode()
    assert 'id="sweep-empty" hidden' in page
    # A run's page leads back to its sweep, and has the chart a table's number links to.
    record_rows(agent_id="executor-z", run_id=run.pk, rows=[{"_step": 1, "loss": 0.5}])
    run_page = browser.get(f"/runs/{run.pk}/").content.decode()
    assert f'href="/sweeps/{sweep.pk}/"><bdi>lr sweep' in run_page
    assert 'id="metric-loss"' in run_page
    missing = browser.get("/sweeps/sweep-nope/")
    assert missing.status_code == 404
    assert browser.get("/sweeps/" + "x" * 5000 + "/").status_code == 404


def test_a_research_loops_compare_link_goes_to_its_sweep(browser):
    from agents_app.models import Agent
    from research_app.models import ResearchLoop

    sweep = Sweep.objects.create(name="Research: lr", kind=SweepKind.RESEARCH)
    agent = Agent.objects.create(id="research-0001", role="research")
    ResearchLoop.objects.create(agent=agent, sweep=sweep, goal="lr")
    loop_page = browser.get(f"/research/{agent.pk}/").content.decode()
    assert f'href="/sweeps/{sweep.pk}/">compare its runs' in loop_page
    page = browser.get(f"/sweeps/{sweep.pk}/").content.decode()
    assert f'href="/research/{agent.pk}/">its research loop' in page
