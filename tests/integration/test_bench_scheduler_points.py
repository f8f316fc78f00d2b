"""bench/scheduler.py's figures time what their names say (issue 40 §3): each one, run at a
tiny size against the real parts (runagentd, the queue on PostgreSQL, the web), starts and
ends at the instants its name names, checked against what the product itself wrote then (rows'
timestamps, the run's job.pid) and against the calls the test watched being made."""

from __future__ import annotations

import itertools

import httpx
import pytest

from bench import scheduler, scheduler_claims
from bench.scheduler_points import (
    EXECUTOR_FIRST_EVENT,
    drain_s,
    hosts_claims_per_s,
    hosts_run_ends_per_s,
    post_ms,
    posts_per_s,
    submit_to_executor_started_ms,
    submit_to_running_ms,
)
from events_app.models import Event
from scheduler_app.models import Run, ScheduleRequest
from scheduler_app.runs import batch as run_batch
from scheduler_app.runs import launch
from tests.call_watch import watch_calls
from tests.live_clients import TOKEN, Web
from tests.runtime_harness import DaemonProcess

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
RUNTIME_EVENTS = {"queued", "started"}  # what the runtime writes of a run before its executor


@pytest.fixture
def workdir(tmp_path, settings):
    settings.AGENTSYS_WORKDIR = tmp_path
    return tmp_path


@pytest.fixture
def runagentd(workdir):
    daemon = DaemonProcess("bench-points", AGENTSYS_GPUS="2", AGENTSYS_WORKDIR=str(workdir))
    yield daemon
    daemon.stop()


@pytest.fixture
def web():
    started = Web()
    yield started
    started.stop()


def test_submit_to_running_ends_at_the_claim_and_executor_started_at_its_first_own_event(
    runagentd, workdir, monkeypatch
):
    submits = watch_calls(monkeypatch, launch, "create_run")
    points = scheduler.submit_to_running(samples=3)
    assert len(points) == len(submits) == 3
    for run, submit in zip(points, submits, strict=True):
        request = ScheduleRequest.objects.get(agent_id=run.agent_id)
        # Start: the submit, the request made by the call that submitted the run.
        assert submit.began <= run.submitted.timestamp() <= submit.returned
        # submit_to_running's end: the claim, which the request and the run both record.
        assert run.placed == request.started_at == Run.objects.get(agent_id=run.agent_id).started_at
        assert submit_to_running_ms(run) == pytest.approx(
            (request.started_at - request.created_at).total_seconds() * 1000
        )
        _ends_at_the_executors_first_own_event(run, workdir, runagentd.pid)


def _ends_at_the_executors_first_own_event(run, workdir, daemon_pid: int) -> None:
    """The end is the first event the executor emitted itself: after the claim's "started"
    (runagentd's, written with the claim), at or after the executor wrote its command's pid
    to job.pid, and that event carries the same pid, which only the executor knows."""
    claim = Event.objects.get(agent_id=run.agent_id, kind="started")
    assert claim.payload["pid"] == daemon_pid
    assert run.executor_up > claim.created_at
    job_pid = workdir / ".agents" / "runs" / run.agent_id / "job.pid"
    assert run.executor_up.timestamp() >= job_pid.stat().st_mtime
    events = Event.objects.filter(agent_id=run.agent_id).order_by("id")
    first_own = events.exclude(kind__in=RUNTIME_EVENTS).first()
    assert (first_own.kind, first_own.created_at) == (EXECUTOR_FIRST_EVENT, run.executor_up)
    assert first_own.payload["pid"] == int(job_pid.read_text().split()[0])
    assert submit_to_executor_started_ms(run) > submit_to_running_ms(run)
    assert submit_to_executor_started_ms(run) == pytest.approx(
        (first_own.created_at - run.submitted).total_seconds() * 1000
    )


def test_drain_runs_from_the_batch_submit_to_the_last_run_ended(runagentd, monkeypatch):
    submits = watch_calls(monkeypatch, run_batch, "create_runs")
    measured = scheduler.drain(count=4)
    [submit] = submits
    runs = list(Run.objects.all())
    assert [run.status for run in runs] == ["done"] * 4
    assert 0 <= submit.began - measured.submitted < 0.5  # the clock starts as the submit is made
    assert all(run.created_at.timestamp() >= measured.submitted for run in runs)
    assert measured.last_ended == max(run.finished_at for run in runs)
    assert drain_s(measured) == pytest.approx(
        max(run.finished_at for run in runs).timestamp() - measured.submitted
    )


def _inside(instant, windows: list[tuple[float, float]]) -> bool:
    return any(began <= instant.timestamp() <= ended for began, ended in windows)


def test_claims_per_s_times_each_claim_and_none_of_the_releases():
    timed = scheduler_claims.timed_claims(gpus=2, queued=6, ended=20)
    claimed = list(ScheduleRequest.objects.filter(id__startswith="sched-c2x"))
    assert timed.claimed == len(claimed) == 6
    assert ScheduleRequest.objects.filter(id__startswith="sched-old", status="done").count() == 20
    for request in claimed:
        assert _inside(request.started_at, timed.windows), "a claim made outside the timing"
        assert not _inside(request.finished_at, timed.windows), "a release was timed"


def test_hosts_claims_are_timed_from_each_rounds_go_to_the_last_host_full():
    claims = scheduler_claims.hosts_claims(hosts=2, gpus=2, queued=10)
    claimed = list(ScheduleRequest.objects.filter(id__startswith="sched-h2x"))
    assert claims.claimed == len(claimed) == 10
    assert len(claims.rounds) == 3  # 4 GPUs, 10 requests: 4, 4, 2
    for request in claimed:
        started, ended = request.started_at.timestamp(), request.finished_at.timestamp()
        [placed_in] = [r for r in claims.rounds if r.go <= started <= max(r.filled)]
        assert placed_in.ends_go <= ended <= max(placed_in.ended)  # ended apart, timed apart
    for earlier, later in itertools.pairwise(claims.rounds):
        assert max(earlier.filled) <= earlier.ends_go <= max(earlier.ended) <= later.go
    claiming = sum(max(r.filled) - r.go for r in claims.rounds)
    ending = sum(max(r.ended) - r.ends_go for r in claims.rounds)
    assert hosts_claims_per_s(claims) == pytest.approx(10 / claiming)
    assert hosts_run_ends_per_s(claims) == pytest.approx(10 / ending)


def _created(runs) -> list[float]:
    return [run.created_at.timestamp() for run in runs]


def test_submission_figures_run_from_the_timed_posts_sent_to_their_last_answer(web, tmp_path):
    project = scheduler.script_project(tmp_path)
    [batch] = scheduler.batch_posts(web.url, TOKEN, project, size=5, samples=1)
    timed = _created(Run.objects.filter(name__startswith="b1-"))
    assert len(timed) == 5
    assert all(batch.sent <= made <= batch.answered for made in timed)
    assert max(_created(Run.objects.filter(name__startswith="b0-"))) < batch.sent  # warm-up
    assert post_ms(batch) == pytest.approx((batch.answered - batch.sent) * 1000)

    posts = scheduler.submit_posts(web.url, TOKEN, project, count=6, clients=3, warm=3)
    timed = _created(Run.objects.filter(name__regex=r"^s[0-9]+$"))
    assert posts.count == len(timed) == 6
    assert all(posts.sent <= made <= posts.answered for made in timed)
    assert max(_created(Run.objects.filter(name__startswith="warm"))) < posts.sent
    assert posts_per_s(posts) == pytest.approx(6 / (posts.answered - posts.sent))


def test_log_to_web_runs_from_the_print_to_the_answer_that_served_the_line(
    web, workdir, monkeypatch
):
    gpu_b = DaemonProcess("gpu-b", AGENTSYS_WORKDIR=str(workdir))
    try:
        gets = watch_calls(monkeypatch, httpx.Client, "get")
        lines = scheduler.log_lines(web.url, TOKEN, workdir, ticks=6)
    finally:
        gpu_b.stop()
    run = Run.objects.get(name="ticker")
    log = (workdir / ".agents" / "runs" / run.agent_id / "run.log").read_text().splitlines()
    # Start: the instant the run wrote into the line as it printed it.
    assert [printed for printed, _ in lines] == [float(line.split()[2]) for line in log]
    # End: after the GET that first returned the line answered, before the next was sent.
    texts = [get.result.json()["text"] for get in gets]
    for line, (_, served) in zip(log, lines, strict=True):
        first = next(i for i, text in enumerate(texts) if line in text)
        later = gets[first + 1].began if first + 1 < len(gets) else float("inf")
        assert gets[first].returned <= served <= later
