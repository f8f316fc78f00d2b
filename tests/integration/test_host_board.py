"""Issue 24, part 4: the hosts board (scheduler_app.hosts.board) and why a queued run waits
(scheduler_app.queue.wait_reasons), on rows a real PostgreSQL holds: several hosts in every
state, GPUs booked by runs, held by someone else's process or disabled, and the queue."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from agentsys.types import RequestStatus
from hosts_app.models import Host, HostStatus
from scheduler_app.hosts.board import host_cards
from scheduler_app.models import GPU, GPUSource, Run, RunStatus, ScheduleRequest
from scheduler_app.queue_board import queue_board, queue_rows
from scheduler_app.runs import launch as runs

pytestmark = pytest.mark.django_db

H100 = "NVIDIA H100 80GB HBM3"
PYTHON_ELSEWHERE = {"pid": 4242, "name": "python", "used_mb": 3000}


@pytest.fixture(autouse=True)
def _first_fit(agentsys_config):
    """The reasons here are first fit's and reserve's; backfill's own (the default) are in
    test_backfill_reasons."""
    agentsys_config(scheduler_policy="fifo")


def a_host(name, gpus=2, *, status=HostStatus.ONLINE, beat_ago=1.0, memory_mb=81559) -> Host:
    beat = timezone.now() - timedelta(seconds=beat_ago) if beat_ago is not None else None
    host = Host.objects.create(name=name, status=status, last_heartbeat=beat, daemon_pid=1)
    GPU.objects.bulk_create(
        GPU(host=host, index=i, name=H100, memory_total_mb=memory_mb, source=GPUSource.NVML)
        for i in range(gpus)
    )
    return host


def a_run(name, gpus=1, **options) -> Run:
    """A run queued as a person's start queues it (its executor agent and request too)."""
    made = runs.create_run(name=name, command="python t.py", gpu_required=gpus, **options)
    return runs.start_run(run_id=made.pk)


def request_of(run: Run) -> ScheduleRequest:
    return ScheduleRequest.objects.get(agent_id=run.agent_id)


def place(run: Run, host: Host, indices: list[int]) -> Run:
    """What a claim leaves: the request running on `indices` of `host`, the GPUs booked."""
    request = request_of(run)
    ScheduleRequest.objects.filter(pk=request.pk).update(
        status=RequestStatus.RUNNING, host=host, gpu_indices=indices, started_at=timezone.now()
    )
    GPU.objects.filter(host=host, index__in=indices).update(allocated_to=request)
    Run.objects.filter(pk=run.pk).update(status=RunStatus.RUNNING, started_at=timezone.now())
    return run


def reasons() -> dict[str, str]:
    rows = queue_rows(host_cards())
    return {row.run.name: row.reason for row in rows}


def card_of(name):
    return next(card for card in host_cards() if card.name == name)


def test_cards_list_online_hosts_first_and_say_what_holds_each_gpu():
    dead = a_host("a-dead", status=HostStatus.DEAD, beat_ago=3600)
    a_host("c-offline", status=HostStatus.OFFLINE, beat_ago=600)
    a_host("d-silent", beat_ago=300)  # says online, but its heartbeat stopped 5 min ago
    busy = a_host("b-busy", gpus=4)
    a_host("z-free")
    holder = place(a_run("resnet lr=0.1"), busy, [0])
    GPU.objects.filter(host=busy, index=1).update(held_by_others=[PYTHON_ELSEWHERE])
    GPU.objects.filter(host=busy, index=2).update(enabled=False)

    cards = host_cards()
    assert [(c.name, c.state) for c in cards] == [
        ("b-busy", "online"),
        ("z-free", "online"),
        ("d-silent", "silent"),
        ("c-offline", "offline"),
        ("a-dead", "dead"),
    ]
    card = cards[0]
    assert [(g.index, g.state, g.holder) for g in card.gpus] == [
        (0, "busy", f"resnet lr=0.1 ({holder.pk})"),
        (1, "foreign", "held by others: python (pid 4242, 3000 MB)"),
        (2, "off", "disabled"),
        (3, "free", "free"),
    ]
    assert card.gpus[0].run_id == holder.pk and card.gpus[0].name == H100
    assert card.gpus[0].memory == "80 GB"
    assert (card.free, card.total, card.busy, card.disabled) == (1, 3, 2, 1)
    assert card.heartbeat_age < timedelta(seconds=30)
    silent = cards[2]
    assert not silent.alive and silent.heartbeat_age > timedelta(minutes=4)
    assert card_of("a-dead").host == dead and not card_of("a-dead").alive


def test_a_card_names_the_runs_it_runs_without_a_gpu_but_not_slurms():
    host = a_host("gpu-a")
    cpu = place(a_run("tokenize corpus", gpus=0), host, [])
    place(a_run("eval on gpu"), host, [1])
    slurm_run = a_run("on the cluster", gpus=0)
    request = request_of(slurm_run)
    ScheduleRequest.objects.filter(pk=request.pk).update(
        status=RequestStatus.RUNNING, host=host, backend="slurm"
    )
    card = card_of("gpu-a")
    assert card.gpu_less_runs == [{"id": cpu.pk, "name": "tokenize corpus"}]
    assert card.gpu_less_total == 1 and card.free == 1


def test_with_no_runagentd_online_every_run_says_so():
    a_host("gpu-a")
    waiting = a_run("needs one")
    Host.objects.update(status=HostStatus.DEAD)
    assert reasons() == {waiting.name: "no runagentd online"}
    an_hour_ago = timezone.now() - timedelta(hours=1)
    Host.objects.update(status=HostStatus.ONLINE, last_heartbeat=an_hour_ago)
    assert reasons() == {waiting.name: "no runagentd online"}  # online, but silent


def test_a_dead_host_does_not_count_for_a_run_too_big_for_the_online_ones():
    a_host("gpu-small", gpus=2)
    big = a_host("gpu-big", gpus=8)
    a_run("needs eight", gpus=8)  # queued while gpu-big was up
    Host.objects.filter(pk=big.pk).update(status=HostStatus.DEAD)
    assert reasons()["needs eight"] == (
        "no host has 8 GPUs; largest has 2; gpu-big has 8 but is dead"
    )


def test_held_and_disabled_gpus_are_not_free_and_the_reason_names_each_host():
    a_host("gpu-a", gpus=2)
    b = a_host("gpu-b", gpus=4)
    a_host("gpu-dead", gpus=8, status=HostStatus.DEAD, beat_ago=900)
    place(a_run("holder a"), Host.objects.get(name="gpu-a"), [0])
    place(a_run("holder b", gpus=2), b, [0, 1])
    GPU.objects.filter(host=b, index=2).update(held_by_others=[PYTHON_ELSEWHERE])
    GPU.objects.filter(host=b, index=3).update(enabled=False)
    a_run("needs two", gpus=2)
    assert reasons()["needs two"] == (
        "no host with 2 free GPUs; largest has 1 free (gpu-a: 1 free of 2, gpu-b: 0 free of 3)"
    )
    # The foreign process lets go: gpu-b has 1 free too, still not 2.
    GPU.objects.filter(host=b, index=2).update(held_by_others=[])
    assert "(gpu-a: 1 free of 2, gpu-b: 1 free of 3)" in reasons()["needs two"]
    # gpu-a's holder ends: two free there, and the run is next in line.
    GPU.objects.filter(host__name="gpu-a").update(allocated_to=None)
    assert reasons()["needs two"] == "next in line"


def test_a_run_that_could_start_says_its_place_among_those_placed_before_it(agentsys_config):
    host = a_host("gpu-a", gpus=4)
    place(a_run("holder"), host, [0])  # 3 free
    a_run("first", gpus=2)
    a_run("tokenize", gpus=0)
    a_run("needs four", gpus=4)
    a_run("second", gpus=1)
    a_run("third", gpus=1)
    fifo = reasons()
    assert fifo == {
        "first": "next in line",
        "tokenize": "needs no GPU: next in line",
        "needs four": "no host with 4 free GPUs; largest has 3 free (gpu-a: 3 free of 4)",
        "second": "behind 1 earlier run",  # first fit: "needs four" does not hold it up
        "third": "behind 2 earlier runs",
    }
    # Under reserve the oldest that can ever run holds the GPUs: "needs four" is ahead too.
    agentsys_config(scheduler_policy="reserve")
    reserve = reasons()
    assert reserve["second"] == "behind 2 earlier runs"
    assert reserve["third"] == "behind 3 earlier runs"


def test_a_slurm_run_waits_for_a_daemon_that_submits_to_slurm():
    Host.objects.create(
        name="login-node", last_heartbeat=timezone.now(), info={"slurm": True, "slurm_detail": ""}
    )
    waiting = a_run("on the cluster", gpus=2, executor_options={"backend": "slurm"})
    assert request_of(waiting).backend == "slurm"
    assert reasons()["on the cluster"] == "waits to be submitted to SLURM"
    Host.objects.update(status=HostStatus.OFFLINE)
    assert reasons()["on the cluster"] == "no runagentd that submits to SLURM is online"


def test_the_board_reads_eight_hosts_and_a_thousand_queued_runs_in_a_few_queries(
    django_assert_max_num_queries,
):
    hosts = [a_host(f"gpu-{n}", gpus=8) for n in range(8)]
    holders = ScheduleRequest.objects.bulk_create(
        ScheduleRequest(agent_cls_path="x", gpu_required=1, status=RequestStatus.RUNNING, host=h)
        for h in hosts
        for _ in range(8)
    )
    for n, request in enumerate(holders):
        GPU.objects.filter(host=hosts[n // 8], index=n % 8).update(allocated_to=request)
    ScheduleRequest.objects.bulk_create(
        ScheduleRequest(agent_cls_path="x", gpu_required=1 + n % 4) for n in range(1000)
    )
    with django_assert_max_num_queries(2):
        cards = host_cards()
    assert [card.busy for card in cards] == [8] * 8
    started = time.perf_counter()
    with django_assert_max_num_queries(9):
        board = queue_board()
    took = time.perf_counter() - started
    print(f"queue_board with 8x8 GPUs and 1000 queued: {took * 1000:.0f} ms")
    assert board["queued_total"] == 1000 and len(board["queue"]) == 200
    assert board["queue"][0].reason.startswith("no host with 1 free GPU; largest has 0 free")
    assert took < 2.0


def test_a_run_that_requires_labels_counts_only_the_hosts_that_have_them():
    h100 = a_host("gpu-h100", gpus=2)
    a100 = a_host("gpu-a100", gpus=4)
    Host.objects.filter(pk=h100.pk).update(labels={"gpu_model": H100, "gpu_memory_gb": 85})
    Host.objects.filter(pk=a100.pk).update(labels={"gpu_model": "A100", "gpu_memory_gb": 40})
    holder = a_run("holder", gpus=2, requires={"gpu_model": "H100"})
    place(holder, h100, [0, 1])
    a_run("wants h100", requires={"gpu_model": "h100"})
    a_run("wants 60 GB", requires={"gpu_memory_gb": 60})
    a_run("wants a100", requires={"gpu_model": "A100"})
    three = a_run("wants 3 x h100", gpus=3, requires={"gpu_model": "H100"})
    assert three.status == RunStatus.REJECTED  # the A100 host's 4 do not make it fit
    Host.objects.filter(pk=h100.pk).update(status=HostStatus.DEAD)
    assert reasons()["wants h100"] == "no online host has gpu_model~h100"
    Host.objects.filter(pk=h100.pk).update(status=HostStatus.ONLINE)
    said = reasons()
    # The A100 host's 4 free GPUs do not count for a run that requires an H100.
    assert said["wants h100"] == (
        "no host with 1 free GPU; largest has 0 free (gpu-h100: 0 free of 2)"
    )
    assert said["wants 60 GB"].startswith("no host with 1 free GPU; largest has 0 free")
    assert said["wants a100"] == "next in line"
