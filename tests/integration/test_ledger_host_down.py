"""Issue 38 §1: a run lost with its host is charged the GPU time it held, once; re-adopted
when the host returns, its real end charges its whole time instead (one entry, its key the
run's, as at any run's end)."""

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from agents_app.models import Agent
from agentsys.scheduling import FifoFirstFit
from agentsys.types import AgentStatus, new_agent_id
from hosts_app.models import Host, HostStatus
from ledger_app.models import SpendEntry
from runtime_app.runtime_store import DjangoRuntimeStore
from scheduler_app.models import GPU, Run, RunStatus, ScheduleRequest
from scheduler_app.queue import claims as queue
from scheduler_app.queue import lifecycle

pytestmark = pytest.mark.django_db


def running_on_dead_host(held: timedelta) -> tuple[Host, Run]:
    """A 2-GPU run that has held its GPUs for `held` on a host that stopped beating."""
    host = Host.objects.create(
        name="gpu-box", status=HostStatus.ONLINE, last_heartbeat=timezone.now()
    )
    GPU.objects.bulk_create(GPU(host=host, index=i, source="declared") for i in range(2))
    loop = Agent.objects.create(
        id=new_agent_id("research"), role="research", cls_path="x", goal="g", project="p"
    )
    agent = Agent.objects.create(
        id=new_agent_id("executor"), role="executor", cls_path="x", project="p", parent=loop
    )
    run = Run.objects.create(name="r", command="true", agent=agent, gpu_required=2)
    request = queue.submit(agent=agent, gpu_required=2)
    [_claimed] = queue.claim(host_id=host.pk, policy=FifoFirstFit())
    ScheduleRequest.objects.filter(pk=request.pk).update(started_at=timezone.now() - held)
    Agent.objects.filter(pk=agent.pk).update(status=AgentStatus.RUNNING, host=host)
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING)
    Host.objects.filter(pk=host.pk).update(last_heartbeat=timezone.now() - timedelta(minutes=5))
    return host, run


def test_a_run_lost_with_its_host_is_charged_the_gpu_time_it_held_once():
    _host, run = running_on_dead_host(timedelta(seconds=90))
    store = DjangoRuntimeStore()
    store.declare_dead_hosts(stale_after=60)
    store.declare_dead_hosts(stale_after=60)  # declared again: nothing more
    assert Run.objects.get(pk=run.pk).status == RunStatus.LOST
    [entry] = SpendEntry.objects.filter(kind="gpu")
    assert entry.key == f"gpu:{run.pk}" and entry.gpus == 2 and entry.host == "gpu-box"
    assert entry.loop_id == run.agent.parent_id
    assert 180 <= float(entry.gpu_seconds) < 190  # 2 GPUs x ~90 s, to when they were freed


def test_a_readopted_run_is_charged_its_whole_time_at_its_real_end():
    host, run = running_on_dead_host(timedelta(seconds=90))
    store = DjangoRuntimeStore()
    store.declare_dead_hosts(stale_after=60)
    store.readopt_lost_runs(host_id=host.pk)
    assert not SpendEntry.objects.filter(kind="gpu").exists()  # it did not end after all
    request = ScheduleRequest.objects.get(agent_id=run.agent_id)
    ScheduleRequest.objects.filter(pk=request.pk).update(
        started_at=timezone.now() - timedelta(seconds=600)
    )
    with transaction.atomic():
        lifecycle.follow_agent(agent_id=run.agent_id, status=AgentStatus.DONE)
    [entry] = SpendEntry.objects.filter(kind="gpu")
    assert entry.key == f"gpu:{run.pk}" and 1200 <= float(entry.gpu_seconds) < 1210
