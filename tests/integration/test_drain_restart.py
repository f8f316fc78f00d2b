"""A 1,000-run sweep on 2 GPUs whose runagentd is killed half-way: every run ends `done`,
once, and nothing stays booked (issue 25: throughput traded nothing). The runs use the mock
backend, as the drain benchmark does, so the test measures the bookkeeping: re-adopting a
real command after a SIGKILL is tests/integration/test_executor.py's."""

import signal

import pytest
from django.db.models import Count

from events_app.models import Event
from scheduler_app.models import GPU, Run, ScheduleRequest
from scheduler_app.runs import batch as run_batch
from tests.helpers import wait_until
from tests.runtime_harness import DaemonProcess

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

RUNS = 1000


def _done() -> int:
    return Run.objects.filter(status="done").count()


@pytest.mark.timeout(400)
def test_runagentd_killed_at_run_500_of_1000_every_run_ends_done_once(tmp_path):
    daemons = [DaemonProcess("drain-host", AGENTSYS_GPUS="0,1")]
    try:
        made = run_batch.create_runs(
            [
                {
                    "name": f"sweep-{i}",
                    "command": "true",
                    "workdir": str(tmp_path),
                    "gpu_required": 1,
                    "params": {"seed": i},
                    "auto_start": True,
                    "executor_options": {"backend": "mock", "mock_delay": 0.005},
                }
                for i in range(RUNS)
            ]
        )
        wait_until(lambda: _done() >= RUNS // 2, 300, interval=0.05, message="run 500")
        daemons[0].stop(signal.SIGKILL)
        assert _done() < RUNS  # killed mid-sweep, not after it
        daemons.append(DaemonProcess("drain-host", AGENTSYS_GPUS="0,1"))
        wait_until(lambda: _done() == RUNS, 300, interval=0.5, message="all 1,000 runs done")
    finally:
        for daemon in daemons:
            if daemon.process.poll() is None:
                daemon.stop()

    runs = list(Run.objects.filter(pk__in=[run.pk for run in made]))
    assert {run.status for run in runs} == {"done"}
    agents = [run.agent_id for run in runs]
    ends = Event.objects.filter(agent_id__in=agents, kind__in=["done", "failed", "lost"])
    per_agent = ends.values("agent_id").annotate(n=Count("id"))
    assert len(per_agent) == RUNS and {row["n"] for row in per_agent} == {1}  # ended once
    assert set(ends.values_list("kind", flat=True)) == {"done"}
    # Only what ran when runagentd died (2 GPUs: at most 2) was resumed; nothing else twice.
    resumed = Event.objects.filter(agent_id__in=agents, kind="resumed_after_restart")
    assert resumed.count() <= 2
    assert set(ScheduleRequest.objects.values_list("status", flat=True)) == {"done"}
    assert not GPU.objects.filter(allocated_to__isnull=False).exists()
