"""Backfill (issue 40 §1) against real runagentd processes on two hosts: a 2-GPU run at the
head of the queue keeps a reservation on the host that frees its GPUs first; a 1-GPU run
behind it whose time limit ends before that starts at once (saying why), one whose limit ends
after waits until the head has started, and a host the head does not wait for stays in use."""

from __future__ import annotations

import pytest
from django.utils import timezone

from agentsys.backfill import clock
from scheduler_app.models import Run, RunStatus, ScheduleRequest
from scheduler_app.runs import launch as runs
from tests.helpers import wait_until
from tests.integration.test_hosts_placement import _until_flag
from tests.runtime_harness import DaemonProcess

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def two_hosts(tmp_path, settings):
    settings.AGENTSYS_WORKDIR = tmp_path
    daemons = [
        DaemonProcess(
            name,
            AGENTSYS_GPUS="2",
            AGENTSYS_HOST_LABELS=f"zone={zone}",
            AGENTSYS_WORKDIR=str(tmp_path),
            AGENTSYS_SCHEDULER_POLICY="backfill",
        )
        for name, zone in (("bf-a", "a"), ("bf-b", "b"))
    ]
    yield tmp_path
    for daemon in daemons:
        daemon.stop()


def _start(name, workdir, *, gpus=1, limit=None, zone=None, command="true") -> Run:
    run = runs.create_run(
        name=name,
        command=command,
        workdir=str(workdir),
        gpu_required=gpus,
        requires={"zone": zone} if zone else {},
        executor_options={"stop_when": [{"wall_seconds": limit}]} if limit else None,
    )
    return runs.start_run(run_id=run.pk)


def _request(run: Run) -> ScheduleRequest:
    return ScheduleRequest.objects.get(agent_id=Run.objects.get(pk=run.pk).agent_id)


def _running(run: Run, timeout: float = 60) -> Run:
    return wait_until(
        lambda: Run.objects.filter(pk=run.pk, status=RunStatus.RUNNING).first(),
        timeout,
        message=f"{run.name} to run (is {Run.objects.get(pk=run.pk).status})",
    )


def test_a_short_run_backfills_a_long_one_waits_for_the_head(two_hosts):
    workdir = two_hosts
    flag, flag_b = workdir / "release-a", workdir / "release-b"
    # The head and the long run each run until told, so that a test poll (every 50 ms, later on
    # a busy machine) sees them running: a head of `true` ran and ended between two polls.
    flag_head, flag_long = workdir / "release-head", workdir / "release-long"
    # bf-a frees a GPU within 10 minutes (its run's time limit), bf-b within an hour.
    holder_a = _start("holder-a", workdir, limit=600, zone="a", command=_until_flag(flag))
    holder_b = _start("holder-b", workdir, limit=3600, zone="b", command=_until_flag(flag_b))
    holder_a, _ = _running(holder_a), _running(holder_b)

    head = _start("head", workdir, gpus=2, command=_until_flag(flag_head))
    long = _start("long", workdir, limit=3600, zone="a", command=_until_flag(flag_long))
    short = _start("short", workdir, limit=300, zone="a", command=_until_flag(flag))
    elsewhere = _start("elsewhere", workdir, limit=3600, zone="b", command=_until_flag(flag_b))

    # The short run ends before bf-a frees 2 GPUs: it starts now, and says so.
    _running(short)
    frees_at = clock(_request(holder_a).started_at.timestamp() + 600)
    assert (
        _request(short).placement_note == f"backfilled: ends before bf-a frees 2 GPUs at {frees_at}"
    )
    # bf-b is not the head's host: a run there starts as usual.
    _running(elsewhere)
    assert _request(elsewhere).placement_note == ""
    # The long one, older than the short one, would delay the head: it waits (first fit
    # would have given it bf-a's free GPU).
    assert Run.objects.get(pk=long.pk).status == RunStatus.QUEUED

    flag.touch()  # holder-a and short end: bf-a frees both GPUs for the head (bf-b stays full)
    head = _running(head)
    assert head.agent.host.name == "bf-a"
    assert Run.objects.get(pk=long.pk).status == RunStatus.QUEUED  # bf-a is the head's now
    flag_head.touch()
    long = _running(long)
    assert head.started_at <= long.started_at
    flag_long.touch()
    flag_b.touch()
    for run in (head, long, short, elsewhere, holder_a, holder_b):
        wait_until(
            lambda run=run: Run.objects.filter(pk=run.pk, status=RunStatus.DONE).exists(),
            60,
            message=f"{run.name} to end done",
        )
    assert _request(head).placement_note == ""
    assert timezone.now() > head.started_at
