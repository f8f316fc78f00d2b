"""The executor queue on a real PostgreSQL: validation, rejections, GPU assignment, release,
stats, and a property test with concurrent claimers."""

import asyncio
import dataclasses
import functools
import random
import threading
from pathlib import Path

import pytest
from django.db import connection, transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents_app.models import Agent
from agentsys.agent import Scope
from agentsys.daemon import Daemon, DaemonSettings
from agentsys.gpus import GpuProcess, gpu_processes, holding_processes, parse_compute_apps
from agentsys.scheduling import FifoFirstFit, HeadReservation
from agentsys.store import AgentRecord
from agentsys.types import AgentRole, AgentStatus, RequestStatus, new_agent_id
from hosts_app.models import Host, HostStatus
from runtime_app.runtime_store import DjangoRuntimeStore
from scheduler_app import selectors, services
from scheduler_app.models import GPU, ScheduleRequest
from scheduler_app.queue import claims as queue
from scheduler_app.queue import lifecycle

pytestmark = pytest.mark.django_db


def host_with_gpus(name: str, count: int) -> Host:
    host = Host.objects.create(name=name, status=HostStatus.ONLINE)
    GPU.objects.bulk_create(GPU(host=host, index=i, source="declared") for i in range(count))
    return host


def submit(gpus, goal="train") -> ScheduleRequest:
    agent = Agent.objects.create(
        id=new_agent_id("executor"), role="executor", cls_path="x", goal=goal, project="p"
    )
    return queue.submit(agent=agent, gpu_required=gpus)


@pytest.mark.parametrize("bad", [-1, 1.5, "2", None, True, [1]])
def test_gpu_required_must_be_a_whole_number(bad):
    host_with_gpus("a", 2)
    with pytest.raises(queue.InvalidRequest, match="gpu_required"):
        submit(bad)
    assert not ScheduleRequest.objects.exists()


def test_more_gpus_than_the_largest_host_is_rejected_with_the_reason():
    host_with_gpus("a", 2)
    host_with_gpus("b", 4)
    request = submit(10**9)
    assert request.status == RequestStatus.REJECTED
    assert request.rejection_reason == "Requires 1000000000 GPUs but only 4 available"
    agent = Agent.objects.get(pk=request.agent_id)
    assert (agent.status, agent.error) == (AgentStatus.REJECTED, request.rejection_reason)
    assert submit(4).status == RequestStatus.QUEUED  # fits the largest host


def test_a_gpu_request_with_no_gpus_anywhere_is_rejected_not_left_queued():
    Host.objects.create(name="cpu-only")
    request = submit(1)
    assert request.status == RequestStatus.REJECTED
    assert "no host has GPUs" in request.rejection_reason
    assert submit(0).status == RequestStatus.QUEUED  # CPU work still queues


def test_dead_hosts_do_not_count_for_capacity():
    host = host_with_gpus("gone", 4)
    host.status = HostStatus.DEAD
    host.save()
    host_with_gpus("alive", 1)
    assert submit(2).rejection_reason == "Requires 2 GPUs but only 1 available"


def test_claim_assigns_specific_indices_in_fifo_order_and_release_frees_them():
    host = host_with_gpus("a", 2)
    first, second, third = submit(1, "first"), submit(1, "second"), submit(1, "third")
    second_id = second.id
    claimed = queue.claim(host_id=host.pk, policy=FifoFirstFit())
    assert [(r.id, r.gpu_indices) for r in claimed] == [(first.id, [0]), (second_id, [1])]
    assert Agent.objects.get(pk=first.agent_id).config["gpu_indices"] == [0]
    assert ScheduleRequest.objects.get(pk=third.pk).status == RequestStatus.QUEUED
    assert queue.claim(host_id=host.pk, policy=FifoFirstFit()) == []  # nothing free
    with transaction.atomic():
        lifecycle.follow_agent(agent_id=first.agent_id, status=AgentStatus.DONE)
    assert ScheduleRequest.objects.get(pk=first.pk).status == RequestStatus.DONE
    [next_one] = queue.claim(host_id=host.pk, policy=FifoFirstFit())
    assert (next_one.id, next_one.gpu_indices) == (third.id, [0])
    assert Agent.objects.get(pk=next_one.agent_id).host_id == host.pk


def _finish(request_id: str) -> None:
    agent_id = ScheduleRequest.objects.get(pk=request_id).agent_id
    with transaction.atomic():
        lifecycle.follow_agent(agent_id=agent_id, status=AgentStatus.DONE)


def _stream_of_small_runs_around_a_large_one(policy, rounds: int = 12) -> ScheduleRequest:
    """Two 1-GPU runs hold a 2-GPU host; a 2-GPU run queues; then, each round, the older
    small run ends and a new small one arrives before the next claim."""
    host = host_with_gpus("a", 2)
    running = [submit(1, "small"), submit(1, "small")]
    queue.claim(host_id=host.pk, policy=policy)
    large = submit(2, "large")
    for _ in range(rounds):
        _finish(running.pop(0).id)
        running.append(submit(1, "small"))
        claimed = {c.id for c in queue.claim(host_id=host.pk, policy=policy)}
        if large.id in claimed:
            break
        running = [r for r in running if r.id in claimed or _status(r) == RequestStatus.RUNNING]
    return ScheduleRequest.objects.get(pk=large.pk)


def _status(request) -> str:
    return ScheduleRequest.objects.values_list("status", flat=True).get(pk=request.pk)


def test_fifo_first_fit_starves_a_large_request_behind_a_stream_of_small_ones():
    large = _stream_of_small_runs_around_a_large_one(FifoFirstFit())
    assert large.status == RequestStatus.QUEUED  # 12 rounds and both GPUs never free at once


def test_head_reservation_runs_the_large_request_as_soon_as_two_gpus_free():
    large = _stream_of_small_runs_around_a_large_one(HeadReservation())
    assert (large.status, sorted(large.gpu_indices)) == (RequestStatus.RUNNING, [0, 1])
    # It held the first freed GPU: the small runs behind it waited instead of taking it.
    assert ScheduleRequest.objects.filter(goal="small", status=RequestStatus.QUEUED).count() == 2


def test_stopped_executor_closes_its_request_as_stopped_or_cancelled_if_it_never_started():
    host = host_with_gpus("a", 1)
    request, waiting = submit(1), submit(1)
    queue.claim(host_id=host.pk, policy=FifoFirstFit())
    with transaction.atomic():
        moved = lifecycle.follow_agent(agent_id=request.agent_id, status=AgentStatus.STOPPED)
        never_ran = lifecycle.follow_agent(agent_id=waiting.agent_id, status=AgentStatus.STOPPED)
    assert (moved, never_ran) == (AgentStatus.STOPPED, AgentStatus.CANCELLED)
    assert ScheduleRequest.objects.get(pk=request.pk).status == RequestStatus.STOPPED
    assert ScheduleRequest.objects.get(pk=waiting.pk).status == RequestStatus.CANCELLED
    assert not GPU.objects.filter(allocated_to__isnull=False).exists()


def test_a_request_whose_agent_was_deleted_neither_blocks_the_queue_nor_stays_queued():
    host = host_with_gpus("a", 1)
    orphan, behind = submit(1), submit(1)
    Agent.objects.filter(pk=orphan.agent_id).delete()  # e.g. from the admin
    [claimed] = queue.claim(host_id=host.pk, policy=FifoFirstFit())
    assert claimed.id == behind.id  # the head had no agent to start; the next one runs
    assert DjangoRuntimeStore().claim_queue(host_id=host.pk, policy="fifo") == []

    DjangoRuntimeStore().record_heartbeat(host_id=host.pk)
    orphan.refresh_from_db()
    assert orphan.status == RequestStatus.CANCELLED
    assert orphan.rejection_reason == lifecycle.AGENT_GONE
    assert selectors.queue_stats()["queue_size"] == 0


def test_an_executor_row_and_its_request_are_stored_together():
    # An idle row without host or request is what the web's agents look like: if the request
    # came a moment later, another daemon could start the executor with no GPUs (it did).
    host = host_with_gpus("a", 1)
    store = DjangoRuntimeStore()
    record = AgentRecord(
        id=new_agent_id("executor"),
        role=AgentRole.EXECUTOR,
        cls_path="x",
        parent_id=None,
        goal="train",
        config={"gpu_required": 1},
        scope=Scope(project="p"),
        status=AgentStatus.IDLE,
        host_id=None,
    )
    outcome = store.create_queued_agent(record=record, gpu_required=1)
    assert outcome["status"] == "queued" and outcome["created"]["agent_id"] == record.id
    assert ScheduleRequest.objects.get(agent_id=record.id).status == RequestStatus.QUEUED
    assert store.claim_pending_agents(host_id=host.pk, limit=10) == []

    too_big = dataclasses.replace(record, id=new_agent_id("executor"))
    outcome = store.create_queued_agent(record=too_big, gpu_required=2)
    assert outcome["status"] == "rejected"
    assert Agent.objects.get(pk=too_big.id).status == AgentStatus.REJECTED
    with pytest.raises(queue.InvalidRequest):
        store.create_queued_agent(
            record=dataclasses.replace(record, id="executor-bad"), gpu_required=-1
        )
    assert not Agent.objects.filter(pk="executor-bad").exists()  # nothing half-stored


def test_stats_per_host_and_total():
    a, b = host_with_gpus("a", 2), host_with_gpus("b", 1)
    submit(1), submit(1), submit(2)
    submit(99)  # rejected
    queue.claim(host_id=a.pk, policy=FifoFirstFit())
    stats = selectors.queue_stats_per_host()
    assert stats["total"] == {
        "gpu_total": 3,
        "gpu_allocated": 2,
        "gpu_available": 1,
        "gpu_held_by_others": 0,
        "queue_size": 1,
        "running": 2,
        "total_requests": 4,
        "by_status": {
            "queued": 1,
            "running": 2,
            "done": 0,
            "failed": 0,
            "stopped": 0,
            "cancelled": 0,
            "rejected": 1,
            "lost": 0,
        },
    }
    assert stats["hosts"]["a"]["gpu_available"] == 0
    assert stats["hosts"]["b"]["gpu_available"] == 1 and b.pk


def _check_invariants():
    # One snapshot for all the reads: claimers commit between our queries otherwise.
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        _check_snapshot()


def _check_snapshot():
    for host in Host.objects.all():
        total = GPU.objects.filter(host=host).count()
        allocated = GPU.objects.filter(host=host, allocated_to__isnull=False)
        assert allocated.count() <= total
        running = ScheduleRequest.objects.filter(host=host, status=RequestStatus.RUNNING)
        indices = [i for r in running for i in r.gpu_indices]
        assert len(indices) == len(set(indices)), f"an index given twice on {host.name}"
        assert sorted(indices) == sorted(allocated.values_list("index", flat=True))
        for request in running:
            assert len(request.gpu_indices) == request.gpu_required


@pytest.mark.django_db(transaction=True)
@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    ops=st.lists(
        st.tuples(st.sampled_from(["submit", "finish", "cancel"]), st.integers(0, 3)),
        min_size=5,
        max_size=25,
    ),
    policy=st.sampled_from([FifoFirstFit(), HeadReservation()]),
)
def test_concurrent_claimers_never_double_book(ops, policy):
    ScheduleRequest.objects.all().delete()
    Agent.objects.all().delete()
    Host.objects.all().delete()
    hosts = [host_with_gpus("h1", 2), host_with_gpus("h2", 3)]
    stop = threading.Event()
    errors: list[BaseException] = []

    def claimer(host_id):
        try:
            while not stop.is_set():
                queue.claim(host_id=host_id, policy=policy)
        except BaseException as exc:  # surfaced below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=claimer, args=(h.pk,)) for h in hosts for _ in range(2)]
    for thread in threads:
        thread.start()
    rng = random.Random(len(ops))
    try:
        for op, gpus in ops:
            if op == "submit":
                submit(gpus)
            else:
                candidates = list(
                    ScheduleRequest.objects.filter(
                        status=RequestStatus.RUNNING if op == "finish" else RequestStatus.QUEUED
                    )
                )
                if candidates:
                    pick = rng.choice(candidates)
                    with transaction.atomic():
                        lifecycle.follow_agent(
                            agent_id=pick.agent_id,
                            status=AgentStatus.DONE if op == "finish" else AgentStatus.STOPPED,
                        )
            _check_invariants()
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert not errors, errors
    _check_invariants()


FIXTURES = Path(__file__).parents[1] / "fixtures" / "gpu-h100"
H100_UUID = "GPU-4ecc990f-d7a8-ad06-a401-87f0ae8f218e"  # the GPU pid 416 holds in the fixture


def _processes(fixture: str) -> list[dict]:
    text = (FIXTURES / fixture).read_text()
    return [dataclasses.asdict(p) for p in holding_processes(parse_compute_apps(text))]


def test_a_free_gpu_held_by_someone_elses_process_is_not_offered():
    host = host_with_gpus("shared", 2)
    GPU.objects.filter(host=host, index=0).update(uuid=H100_UUID)
    assert services.record_foreign_gpu_use(
        host_id=host.pk, processes=_processes("compute-apps-busy.csv")
    ) == [0]
    held = GPU.objects.get(host=host, index=0).held_by_others
    assert held == [{"pid": 416, "name": "python3", "used_mb": 4334}]
    first, second = submit(1), submit(1)
    [claimed] = queue.claim(host_id=host.pk, policy=FifoFirstFit())
    assert (claimed.id, claimed.gpu_indices) == (first.id, [1])  # not GPU 0
    stats = selectors.queue_stats(host_id=host.pk)
    assert (stats["gpu_held_by_others"], stats["gpu_available"]) == (1, 0)
    # The other process let go: GPU 0 is offered again.
    assert services.record_foreign_gpu_use(
        host_id=host.pk, processes=_processes("compute-apps-idle.csv")
    ) == [0]
    [claimed] = queue.claim(host_id=host.pk, policy=FifoFirstFit())
    assert (claimed.id, claimed.gpu_indices) == (second.id, [0])


def test_a_gpu_allocated_to_our_run_is_never_marked_held_by_others():
    host = host_with_gpus("ours", 1)
    GPU.objects.filter(host=host).update(uuid=H100_UUID)
    submit(1)
    queue.claim(host_id=host.pk, policy=FifoFirstFit())
    busy = _processes("compute-apps-busy.csv")  # this time pid 416 is our run
    assert services.record_foreign_gpu_use(host_id=host.pk, processes=busy) == []
    assert GPU.objects.get(host=host).held_by_others == []


def test_small_processes_do_not_hold_a_gpu():
    host = host_with_gpus("desk", 1)
    GPU.objects.filter(host=host).update(uuid="GPU-x")
    display = [GpuProcess(pid=9, name="Xorg", gpu_uuid="GPU-x", used_mb=40)]
    processes = [dataclasses.asdict(p) for p in holding_processes(display)]
    assert services.record_foreign_gpu_use(host_id=host.pk, processes=processes) == []


@pytest.mark.django_db(transaction=True)
def test_the_daemon_reads_nvidia_smi_at_heartbeat_and_marks_held_gpus():
    host = host_with_gpus("smi-host", 2)
    GPU.objects.filter(host=host, index=0).update(uuid=H100_UUID)
    text = (FIXTURES / "compute-apps-busy.csv").read_text()
    daemon = Daemon(
        DjangoRuntimeStore(),
        DaemonSettings(host_name="smi-host"),
        list_gpu_processes=functools.partial(gpu_processes, runner=lambda args, timeout: text),
    )
    daemon.host_id = host.pk
    try:
        assert asyncio.run(daemon.check_foreign_gpu_use()) == [0]
        assert asyncio.run(daemon.check_foreign_gpu_use()) == []  # nothing new
    finally:
        daemon._db_thread.submit(daemon.store.close).result()
        daemon._db_thread.shutdown()
    assert GPU.objects.get(host=host, index=0).held_by_others[0]["pid"] == 416
