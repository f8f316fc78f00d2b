"""The runs pages as Django renders them (the browser tests drive them live): login needed,
filters and search, the htmx partials, actions that refuse clearly, and no 500 on bad input."""

import pytest

from scheduler_app.metrics.series import record_rows
from scheduler_app.models import Run, RunStatus

pytestmark = pytest.mark.django_db


def test_pages_need_login(client):
    run = Run.objects.create(name="r", command="true")
    for url in ("/runs/", f"/runs/{run.pk}/", "/runs/compare/"):
        response = client.get(url)
        assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    assert client.post(f"/runs/{run.pk}/start/").status_code == 302
    assert Run.objects.get(pk=run.pk).status == RunStatus.READY


def test_the_list_filters_searches_and_shows_the_last_loss(browser):
    lr = Run.objects.create(name="sweep lr=0.1", command="python train.py --lr 0.1")
    Run.objects.create(name="baseline", command="python base.py", status=RunStatus.FAILED)
    record_rows(agent_id="executor-x", run_id=lr.pk, rows=[{"_step": 9, "loss": 0.1234567}])
    page = browser.get("/runs/").content.decode()
    assert "sweep lr=0.1" in page and "baseline" in page and "0.1235" in page
    found = browser.get("/runs/?q=train.py").content.decode()
    assert "sweep lr=0.1" in found and "baseline" not in found
    failed = browser.get("/runs/?status=failed", HTTP_HX_REQUEST="true").content.decode()
    assert "baseline" in failed and "sweep lr" not in failed
    assert "<html" not in failed  # htmx gets the rows only
    assert browser.get("/runs/?status=nonsense&q=" + "x" * 5000).status_code == 200


def test_a_run_page_and_its_sections(browser):
    run = Run.objects.create(name="r", command="echo hi", params={"lr": 0.1})
    record_rows(agent_id="executor-y", run_id=run.pk, rows=[{"_step": 1, "loss": float("nan")}])
    page = browser.get(f"/runs/{run.pk}/").content.decode()
    assert 'data-key="loss"' in page and "last NaN" in page and "echo hi" in page
    head = browser.get(f"/runs/{run.pk}/?part=head", HTTP_HX_REQUEST="true").content.decode()
    assert 'id="run-head"' in head and "<html" not in head
    assert browser.get("/runs/run-nope/").status_code == 404


def test_actions_refuse_what_cannot_be_done(browser):
    run = Run.objects.create(name="r", command="true", status=RunStatus.DONE)
    response = browser.post(f"/runs/{run.pk}/stop/", follow=True)
    assert "only" in response.content.decode() or "cannot" in response.content.decode()
    assert Run.objects.get(pk=run.pk).status == RunStatus.DONE
    assert browser.post(f"/runs/{run.pk}/explode/").status_code == 404
    assert browser.get(f"/runs/{run.pk}/stop/").status_code == 405


def test_actions_need_the_csrf_token(django_user_model):
    from django.test import Client

    strict = Client(enforce_csrf_checks=True)
    strict.force_login(django_user_model.objects.create_user("eve", password="x" * 12))
    run = Run.objects.create(name="r", command="true")
    assert strict.post(f"/runs/{run.pk}/start/").status_code == 403
    assert Run.objects.get(pk=run.pk).status == RunStatus.READY


def test_compare_names_its_runs_and_their_keys(browser):
    a = Run.objects.create(name="a", command="true")
    b = Run.objects.create(name="b", command="true")
    record_rows(agent_id="executor-a", run_id=a.pk, rows=[{"_step": 1, "acc": 1, "loss": 2}])
    page = browser.get(f"/runs/compare/?ids={a.pk}&ids={b.pk}&ids=run-gone").content.decode()
    assert f'data-ids="{a.pk},{b.pk}"' in page
    assert page.index(">loss<") < page.index(">acc<")  # loss first
    assert "Choose runs" in browser.get("/runs/compare/").content.decode()


def test_rerun_starts_a_new_run_and_shows_it(browser):
    old = Run.objects.create(name="r", command="true", status=RunStatus.DONE)
    response = browser.post(f"/runs/{old.pk}/rerun/")
    new = Run.objects.exclude(pk=old.pk).get()
    assert response["Location"] == f"/runs/{new.pk}/"
    assert (new.command, new.name) == ("true", "r")


def _failed_run(tmp_path, log: str) -> Run:
    (tmp_path / "run.log").write_text(log)
    return Run.objects.create(
        name="diverged",
        command="python train.py --lr 50",
        status=RunStatus.FAILED,
        exit_code=1,
        error="RunFailed: command exited with code 1",
        run_dir=str(tmp_path),
    )


def test_a_failed_run_shows_the_logs_last_error_line(browser, tmp_path):
    log = (
        "step 90 loss 1e+305\n"
        "Traceback (most recent call last):\n"
        '  File "train.py", line 33, in <module>\n'
        "    loss = sum(((w * x + b) - y) ** 2 for x, y in data) / len(data)\n"
        "OverflowError: (34, 'Numerical result out of range')\n"
    )
    run = _failed_run(tmp_path, "x" * 100_000 + "\n" + log)  # the tail is read, not the log
    page = browser.get(f"/runs/{run.pk}/").content.decode()
    assert "command exited with code 1" in page
    assert (
        "The log's last error: <code>OverflowError: (34, &#x27;Numerical result out of "
        "range&#x27;)</code>" in page
    )


@pytest.mark.parametrize(
    ("log", "shown"),
    [
        ("loading\nRuntimeError: CUDA error: out of memory\nbye\n", "RuntimeError: CUDA error"),
        ("step 1\nfatal: not a git repository\nstep 2\n", "fatal: not a git repository"),
        ("step 1\nstep 2\n", ""),
        ("", ""),
    ],
)
def test_the_last_error_line_is_an_exception_else_a_line_naming_an_error(tmp_path, log, shown):
    from scheduler_app.runs.failure_line import last_error_line

    (tmp_path / "run.log").write_text(log)
    assert last_error_line(str(tmp_path)).startswith(shown) and bool(shown) == bool(
        last_error_line(str(tmp_path))
    )
    assert last_error_line(str(tmp_path / "missing")) == "" and last_error_line("") == ""


def test_a_running_runs_duration_is_marked_to_tick(browser):
    from datetime import timedelta

    from django.utils import timezone

    started = timezone.now() - timedelta(seconds=125)
    running = Run.objects.create(
        name="going", command="true", status=RunStatus.RUNNING, started_at=started
    )
    ended = Run.objects.create(
        name="ended",
        command="true",
        status=RunStatus.DONE,
        started_at=started,
        finished_at=started + timedelta(seconds=30),
    )
    listing = browser.get("/runs/").content.decode()
    assert '<span data-ticking-seconds="125">2m 05s</span>' in listing
    rows = listing.split('id="run-rows">')[1].split("</tbody>")[0]
    assert rows.count("data-ticking-seconds") == 1 and ">30s<" in rows  # the ended one is still
    page = browser.get(f"/runs/{running.pk}/").content.decode()
    assert '<dd id="run-duration"><span data-ticking-seconds="125">2m 05s</span>' in page
    assert "durations.js" in page
    assert "data-ticking-seconds" not in browser.get(f"/runs/{ended.pk}/").content.decode()
