"""Fair share between people (issue 40 §1) against a real runagentd: one person's sweep of
runs does not hold another person's single run behind it. Ada fills both GPUs and queues
three more; Bob's one run, made after, starts at the first GPU freed, and the queue page lists
it first. (Shares other than equal: tests/unit/test_fair_share.py.)"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from scheduler_app.models import Run, RunStatus, ScheduleRequest
from scheduler_app.queue_board import queued_in_turn
from scheduler_app.runs import launch as runs
from tests.helpers import wait_until
from tests.integration.test_hosts_placement import _until_flag
from tests.runtime_harness import DaemonProcess

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def host(tmp_path, settings):
    yield from _host(tmp_path, settings, gpus=2)


@pytest.fixture
def three_gpu_host(tmp_path, settings):
    yield from _host(tmp_path, settings, gpus=3)


def _host(workdir, settings, *, gpus):
    """A runagentd with `gpus` GPUs; its workdir."""
    settings.AGENTSYS_WORKDIR = workdir
    daemon = DaemonProcess("fs-host", AGENTSYS_GPUS=str(gpus), AGENTSYS_WORKDIR=str(workdir))
    yield workdir
    for flag in workdir.glob("*.flag-name"):
        (workdir / flag.stem).touch()
    daemon.stop()


def _run(name, person, workdir) -> Run:
    """A 1-GPU run `person` made, going until the file `name` exists in the workdir."""
    (workdir / f"{name}.flag-name").touch()
    return runs.create_run(
        name=name,
        command=_until_flag(workdir / name),
        workdir=str(workdir),
        gpu_required=1,
        auto_start=True,
        created_by=person,
    )


def _status(run):
    return Run.objects.get(pk=run.pk).status


def _running(run):
    wait_until(lambda: _status(run) == RunStatus.RUNNING, 60, message=f"{run.name} to run")


def test_one_persons_sweep_does_not_hold_anothers_run_behind_it(host):
    workdir = host
    ada, bob = (get_user_model().objects.create_user(name) for name in ("ada", "bob"))
    sweep = [_run(f"ada-{n}", ada, workdir) for n in range(5)]
    _running(sweep[0])
    _running(sweep[1])
    single = _run("bob-0", bob, workdir)
    accounts = {r.account for r in ScheduleRequest.objects.filter(status="queued")}
    assert accounts == {"ada", "bob"}
    # The queue page lists Bob's first: it is the one the next claim takes.
    first = queued_in_turn(10)[0]
    assert first.agent_id == Run.objects.get(pk=single.pk).agent_id

    (workdir / "ada-0").touch()  # a GPU frees: Ada has one in use, Bob none
    _running(single)
    assert [_status(run) for run in sweep[2:]] == [RunStatus.QUEUED] * 3

    (workdir / "ada-1").touch()  # Ada has none in use now, Bob one: Ada's next
    _running(sweep[2])
    assert [_status(run) for run in sweep[3:]] == [RunStatus.QUEUED] * 2


def test_holding_as_many_gpus_the_one_asking_for_less_goes_first(three_gpu_host):
    """Ada and Bob hold a GPU each when Carol's frees one: Ada asks for 3 (one held, two
    queued), Bob for 2, so Bob's run goes first (equal shares alone tie, then Ada's name)."""
    workdir = three_gpu_host
    ada, bob, carol = (get_user_model().objects.create_user(n) for n in ("ada", "bob", "carol"))
    blocker = _run("carol-0", carol, workdir)
    _running(blocker)
    sweep = [_run(f"ada-{n}", ada, workdir) for n in range(4)]
    _running(sweep[0])
    _running(sweep[1])
    few = [_run(f"bob-{n}", bob, workdir) for n in range(2)]
    (workdir / "ada-0").touch()  # Ada holds one GPU, Bob none: Bob's first
    _running(few[0])
    # Both hold one now; Bob asks for less: the queue page lists his next run first.
    assert queued_in_turn(10)[0].agent_id == Run.objects.get(pk=few[1].pk).agent_id

    (workdir / "carol-0").touch()
    _running(few[1])
    assert [_status(run) for run in sweep[2:]] == [RunStatus.QUEUED] * 2
