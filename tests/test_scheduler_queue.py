"""The executor queue on a real PostgreSQL: validation, rejections, GPU assignment, release,
stats, and a property test with concurrent claimers."""

import random
import threading

import pytest
from django.db import connection, transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents_app.models import Agent
from agentsys.scheduling import FifoFirstFit, HeadReservation
from agentsys.types import AgentStatus, RequestStatus, new_agent_id
from scheduler_app import queue
from scheduler_app.models import GPU, Host, HostStatus, ScheduleRequest

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
    assert (agent.status, agent.error) == (AgentStatus.FAILED, request.rejection_reason)
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
    first, _, third = submit(1, "first"), submit(1, "second"), submit(1, "third")
    claimed = queue.claim(host_id=host.pk, policy=FifoFirstFit())
    assert [(r.goal, r.gpu_indices) for r in claimed] == [("first", [0]), ("second", [1])]
    assert ScheduleRequest.objects.get(pk=third.pk).status == RequestStatus.QUEUED
    assert queue.claim(host_id=host.pk, policy=FifoFirstFit()) == []  # nothing free
    with transaction.atomic():
        queue.release_for_agent(agent_id=first.agent_id, agent_status=AgentStatus.DONE)
    assert ScheduleRequest.objects.get(pk=first.pk).status == RequestStatus.DONE
    [next_one] = queue.claim(host_id=host.pk, policy=FifoFirstFit())
    assert (next_one.goal, next_one.gpu_indices) == ("third", [0])
    assert Agent.objects.get(pk=next_one.agent_id).host_id == host.pk


def test_stopped_executor_closes_its_request_as_cancelled():
    host = host_with_gpus("a", 1)
    request = submit(1)
    queue.claim(host_id=host.pk, policy=FifoFirstFit())
    with transaction.atomic():
        queue.release_for_agent(agent_id=request.agent_id, agent_status=AgentStatus.STOPPED)
    assert ScheduleRequest.objects.get(pk=request.pk).status == RequestStatus.CANCELLED
    assert not GPU.objects.filter(allocated_to__isnull=False).exists()


def test_stats_per_host_and_total():
    a, b = host_with_gpus("a", 2), host_with_gpus("b", 1)
    submit(1), submit(1), submit(2)
    submit(99)  # rejected
    queue.claim(host_id=a.pk, policy=FifoFirstFit())
    stats = queue.stats_per_host()
    assert stats["total"] == {
        "gpu_total": 3,
        "gpu_allocated": 2,
        "gpu_available": 1,
        "queue_size": 1,
        "running": 2,
        "total_requests": 4,
        "by_status": {
            "queued": 1,
            "running": 2,
            "done": 0,
            "failed": 0,
            "rejected": 1,
            "cancelled": 0,
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
                        queue.release_for_agent(
                            agent_id=pick.agent_id,
                            agent_status=AgentStatus.DONE
                            if op == "finish"
                            else AgentStatus.STOPPED,
                        )
            _check_invariants()
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert not errors, errors
    _check_invariants()
