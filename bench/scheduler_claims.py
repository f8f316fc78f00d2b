"""bench/scheduler.py's claim throughput figures: claims in this process with 10^5 finished
requests in the table (claims_per_s_with_1e5_finished_*), and several hosts' claimers on one
queue at once (claims_per_s_4_hosts; bench/scale.py's 64 hosts). Each returns its instants
(bench/scheduler_points.py); the *_per_second functions, the figure."""

from __future__ import annotations

import time

from bench.scheduler_points import HostsClaims, TimedClaims, claims_per_s, hosts_claims_per_s


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
) -> float:
    return hosts_claims_per_s(hosts_claims(hosts, gpus, queued, policy, accounts))


def hosts_claims(
    hosts: int = 4,
    gpus: int = 8,
    queued: int = 4000,
    policy: str = "fifo",
    accounts: tuple[str, ...] = ("",),
) -> HostsClaims:
    """`hosts` processes, each a host's claimer as runagentd runs it (`policy`), claim 1-GPU
    requests of `accounts` from one queue at once, each releasing what it took before
    claiming again (as runs end), until the queue is empty."""
    import multiprocessing

    from django.db import connections

    host_ids = [_host_with_gpus(f"claim-bench-host-{n}", gpus).pk for n in range(hosts)]
    _queue_one_gpu_requests(f"h{hosts}x", queued, accounts)
    _settle()
    connections.close_all()  # each claimer opens its own, as each runagentd does
    context = multiprocessing.get_context("fork")
    go, results = context.Event(), context.Queue()
    claimers = [
        context.Process(target=_claimer, args=(host_id, policy, go, results))
        for host_id in host_ids
    ]
    for claimer in claimers:
        claimer.start()
    time.sleep(1.0)  # all connected and waiting
    let_go = time.time()
    go.set()
    ends = [results.get(timeout=600) for _ in claimers]
    for claimer in claimers:
        claimer.join()
    claimed = sum(count for count, _ in ends)
    if claimed != queued:
        raise RuntimeError(f"claimed {claimed} of {queued}: a request was lost or taken twice")
    return HostsClaims(claimed, let_go, [end for _, end in ends])


def _claimer(host_id: int, policy_name: str, go, results) -> None:
    from django.db import connection, transaction

    from agentsys.policies import policy_named
    from agentsys.types import AgentStatus
    from scheduler_app.models import ScheduleRequest
    from scheduler_app.queue import claims as queue
    from scheduler_app.queue import lifecycle

    policy, claimed = policy_named(policy_name), 0
    connection.ensure_connection()  # connecting is not timed
    go.wait()
    while True:
        taken = queue.claim(host_id=host_id, policy=policy)
        claimed += len(taken)
        with transaction.atomic():
            for request in taken:
                lifecycle.follow_agent(agent_id=request.agent_id, status=AgentStatus.DONE)
        if not taken and not ScheduleRequest.objects.filter(status="queued").exists():
            break
    results.put((claimed, time.time()))


def _settle() -> None:
    """Measure the steady state: without this, autovacuum wakes up for the rows just
    written and analyzes and vacuums them while the claims are being timed."""
    from django.db import connection

    with connection.cursor() as cursor:
        for table in ("scheduler_app_schedulerequest", "scheduler_app_gpu", "agents_app_agent"):
            cursor.execute(f"VACUUM ANALYZE {table}")
