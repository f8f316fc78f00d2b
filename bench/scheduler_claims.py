"""bench/scheduler.py's claim throughput figures: claims in this process with 10^5 finished
requests in the table (claims_per_s_with_1e5_finished_*), and several hosts' claimers on one
queue at once (claims_per_s_4_hosts; bench/scale.py's 64 hosts). Each returns its instants
(bench/scheduler_points.py); the *_per_second functions, the figure."""

from __future__ import annotations

import math
import time

from bench.scheduler_points import (
    ClaimRound,
    HostsClaims,
    TimedClaims,
    claims_per_s,
    hosts_claims_per_s,
    hosts_run_ends_per_s,
)


def claims_per_second(gpus: int, queued: int = 2000, ended: int = 100_000) -> float:
    return claims_per_s(timed_claims(gpus, queued, ended))


def timed_claims(gpus: int, queued: int = 2000, ended: int = 100_000) -> TimedClaims:
    """In-process: 1-GPU requests claimed on a host with `gpus` GPUs, released, repeated;
    only the claims are timed. `ended` old requests (done) sit in the table throughout."""
    from django.db import transaction

    from agentsys.scheduling import FifoFirstFit
    from agentsys.types import AgentStatus, RequestStatus
    from scheduler_app.models import ScheduleRequest
    from scheduler_app.queue import claims as queue
    from scheduler_app.queue import lifecycle

    missing = ended - ScheduleRequest.objects.filter(id__startswith="sched-old").count()
    ScheduleRequest.objects.bulk_create(
        (
            ScheduleRequest(id=f"sched-old{i:07d}", agent_cls_path="x", status=RequestStatus.DONE)
            for i in range(ended - missing, ended)
        ),
        batch_size=5000,
    )
    host = _host_with_gpus(f"claim-bench-{gpus}", gpus)
    _queue_one_gpu_requests(f"c{gpus}x", queued)
    _settle()
    timed, policy = TimedClaims(), FifoFirstFit()
    while timed.claimed < queued:
        began = time.time()
        taken = queue.claim(host_id=host.pk, policy=policy)
        timed.windows.append((began, time.time()))
        timed.claimed += len(taken)
        with transaction.atomic():
            for request in taken:
                lifecycle.follow_agent(agent_id=request.agent_id, status=AgentStatus.DONE)
    return timed


def _host_with_gpus(name: str, gpus: int):
    from hosts_app.models import Host
    from scheduler_app.models import GPU

    host = Host.objects.create(name=name)
    GPU.objects.bulk_create(GPU(host=host, index=i, source="declared") for i in range(gpus))
    return host


def _queue_one_gpu_requests(prefix: str, count: int, accounts: tuple[str, ...] = ("",)) -> None:
    """`count` queued 1-GPU requests, each with its executor agent row, their accounts
    taken in turn from `accounts`."""
    from agents_app.models import Agent
    from scheduler_app.models import ScheduleRequest

    agents = Agent.objects.bulk_create(
        Agent(id=f"executor-{prefix}{i:06d}", role="executor", cls_path="x", project="b")
        for i in range(count)
    )
    ScheduleRequest.objects.bulk_create(
        ScheduleRequest(
            id=f"sched-{prefix}{i:06d}",
            agent=a,
            agent_cls_path="x",
            gpu_required=1,
            account=accounts[i % len(accounts)],
        )
        for i, a in enumerate(agents)
    )


def claims_per_second_hosts(
    hosts: int = 4,
    gpus: int = 8,
    queued: int = 4000,
    policy: str = "fifo",
    accounts: tuple[str, ...] = ("",),
) -> tuple[float, float]:
    """(claims/s, run ends/s) of `hosts` claimers on one queue (hosts_claims)."""
    claims = hosts_claims(hosts, gpus, queued, policy, accounts)
    return hosts_claims_per_s(claims), hosts_run_ends_per_s(claims)


def hosts_claims(
    hosts: int = 4,
    gpus: int = 8,
    queued: int = 4000,
    policy: str = "fifo",
    accounts: tuple[str, ...] = ("",),
) -> HostsClaims:
    """`hosts` processes, each a host's claimer as runagentd runs it (`policy`), claim 1-GPU
    requests of `accounts` from one queue in rounds: all at once until every host is full,
    then all end their runs at once (as runs end), until the queue is empty."""
    import multiprocessing

    from django.db import connections

    host_ids = [_host_with_gpus(f"claim-bench-host-{n}", gpus).pk for n in range(hosts)]
    _queue_one_gpu_requests(f"h{hosts}x", queued, accounts)
    _settle()
    connections.close_all()  # each claimer opens its own, as each runagentd does
    rounds = math.ceil(queued / (hosts * gpus))
    context = multiprocessing.get_context("fork")
    go, full, ending, results = (*(context.Barrier(hosts + 1) for _ in range(3)), context.Queue())
    claimers = [
        context.Process(
            target=_claimer, args=(host_id, gpus, policy, rounds, (go, full, ending), results)
        )
        for host_id in host_ids
    ]
    for claimer in claimers:
        claimer.start()
    timed, claimed = [], 0
    for _ in range(rounds):
        let_go = _last_to(go, hosts)
        filled = [results.get(timeout=600) for _ in claimers]
        claimed += sum(count for count, _ in filled)
        let_end = _last_to(full, hosts)
        ended = [results.get(timeout=600) for _ in claimers]
        ending.wait()
        timed.append(ClaimRound(let_go, [at for _, at in filled], let_end, ended))
    for claimer in claimers:
        claimer.join()
    if claimed != queued:
        raise RuntimeError(f"claimed {claimed} of {queued}: a request was lost or taken twice")
    return HostsClaims(claimed, timed)


def _last_to(barrier, others: int) -> float:
    """Pass `barrier` once the `others` wait at it; when they were let go."""
    while barrier.n_waiting < others:
        time.sleep(0.001)
    let_go = time.time()
    barrier.wait()
    return let_go


def _claimer(host_id: int, gpus: int, policy_name: str, rounds: int, barriers, results) -> None:
    from django.db import connection, transaction

    from agentsys.policies import policy_named
    from agentsys.types import AgentStatus
    from scheduler_app.models import ScheduleRequest
    from scheduler_app.queue import claims as queue
    from scheduler_app.queue import lifecycle

    go, full, ending = barriers
    policy = policy_named(policy_name)
    connection.ensure_connection()  # connecting is not timed
    for _ in range(rounds):
        go.wait()
        taken = []
        while len(taken) < gpus:
            took = queue.claim(host_id=host_id, policy=policy)
            taken += took  # none: another host took what this one chose; try again
            if not took and not ScheduleRequest.objects.filter(status="queued").exists():
                break
        results.put((len(taken), time.time()))
        full.wait()
        with transaction.atomic():
            for request in taken:
                lifecycle.follow_agent(agent_id=request.agent_id, status=AgentStatus.DONE)
        results.put(time.time())
        ending.wait()


def _settle() -> None:
    """Measure the steady state: without this, autovacuum wakes up for the rows just
    written and analyzes and vacuums them while the claims are being timed."""
    from django.db import connection

    with connection.cursor() as cursor:
        for table in ("scheduler_app_schedulerequest", "scheduler_app_gpu", "agents_app_agent"):
            cursor.execute(f"VACUUM ANALYZE {table}")
