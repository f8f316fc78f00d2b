"""Scheduler figures: submit → running latency through a real runagentd, claim throughput
with 10^5 finished requests in the table, four hosts claiming from one queue at once
(claims_per_s_4_hosts), the drain time of 1,000 queued runs on 2 declared GPUs, and how soon
a line a run prints on a GPU host is served by a web on another machine (its log shipped
through PostgreSQL), and how fast runs are submitted: one POST /api/runs/batch of 1,000
runs (batch_submit_1000_ms), 300 POST /api/runs from 20 clients at once
(submit_runs_per_s_20_clients). `python bench/scheduler.py hosts` measures the four-hosts
figure alone, `python bench/scheduler.py log` the log figure alone, `python
bench/scheduler.py submit` the two submission figures alone, `python bench/scheduler.py
drain [N]` the submit latencies and the drain of N (default 1,000) queued runs alone."""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._report import percentile, report
from bench.harness import BenchSystem

MOCK = {"backend": "mock", "mock_delay": 0}


def _wait(predicate, timeout=120.0, interval=0.002):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError("timed out")
        time.sleep(interval)


def submit_to_running(samples: int = 50) -> tuple[list[float], list[float]]:
    """Per run: submit → its request placed on GPUs (the scheduler's part: the claim's
    transaction sets the request's started_at, and the agent's with it), and submit → its
    executor up and reporting: the `started` event its executor's own STARTED message makes
    (supervisor), stored after the executor has come up in runagentd, not at the claim."""
    from events_app.models import Event
    from scheduler_app.models import ScheduleRequest
    from scheduler_app.runs import launch as runs

    placed, started = [], []
    for _ in range(samples):
        run = runs.create_run(
            name="b", command="true", gpu_required=1, auto_start=True, executor_options=MOCK
        )
        request = ScheduleRequest.objects.filter(agent_id=run.agent_id)
        _wait(lambda r=request: r.filter(status="done").exists())
        row = request.get()
        up = Event.objects.filter(agent_id=run.agent_id, kind="started").order_by("id").first()
        placed.append((row.started_at - row.created_at).total_seconds() * 1000)
        started.append((up.created_at - row.created_at).total_seconds() * 1000)
    return placed, started


def claims_per_second(gpus: int, queued: int = 2000, ended: int = 100_000) -> float:
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
    claimed, spent, policy = 0, 0.0, FifoFirstFit()
    while claimed < queued:
        started = time.perf_counter()
        taken = queue.claim(host_id=host.pk, policy=policy)
        spent += time.perf_counter() - started
        claimed += len(taken)
        with transaction.atomic():
            for request in taken:
                lifecycle.follow_agent(agent_id=request.agent_id, status=AgentStatus.DONE)
    return claimed / spent


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
    """`hosts` processes, each a host's claimer as runagentd runs it (`policy`), claim 1-GPU
    requests of `accounts` from one queue at once, each releasing what it took before
    claiming again (as runs end); claims made / wall time until the queue is empty, releases
    included."""
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
    started = time.perf_counter()
    go.set()
    ends = [results.get(timeout=600) for _ in claimers]
    for claimer in claimers:
        claimer.join()
    claimed = sum(count for count, _ in ends)
    if claimed != queued:
        raise RuntimeError(f"claimed {claimed} of {queued}: a request was lost or taken twice")
    return claimed / (max(end for _, end in ends) - started)


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
    results.put((claimed, time.perf_counter()))


def _settle() -> None:
    """Measure the steady state: without this, autovacuum wakes up for the rows just
    written and analyzes and vacuums them while the claims are being timed."""
    from django.db import connection

    with connection.cursor() as cursor:
        for table in ("scheduler_app_schedulerequest", "scheduler_app_gpu", "agents_app_agent"):
            cursor.execute(f"VACUUM ANALYZE {table}")


def drain_seconds(count: int = 1000) -> float:
    """A sweep of `count` 1-GPU runs queued at once (one batch, as a script or a loop sends
    it), timed from the submit until the last has ended: on 2 GPUs, with the mock backend,
    what is measured is AgentSys's own bookkeeping per run."""
    from scheduler_app.models import Run
    from scheduler_app.runs import batch as run_batch

    started = time.monotonic()
    made = run_batch.create_runs(
        [
            {
                "name": f"d{i}",
                "command": "true",
                "gpu_required": 1,
                "auto_start": True,
                "executor_options": MOCK,
            }
            for i in range(count)
        ]
    )
    ids = [run.id for run in made]
    # Looked at every 50 ms: a count over the sweep every 2 ms took a core from what it measures.
    _wait(lambda: Run.objects.filter(pk__in=ids, status="done").count() == count, 900, 0.05)
    return time.monotonic() - started


def _project(system: BenchSystem) -> str:
    """A script's project: a small git work tree with an uncommitted change, so that each run
    made records its code (commit and patch), as a real one does."""
    import subprocess

    path = Path(system.tmp.name) / "project"
    path.mkdir()
    identity = ["-c", "user.name=bench", "-c", "user.email=bench@bench"]
    (path / "train.py").write_text("print('train')\n")
    for args in (["init", "-q"], ["add", "-A"], [*identity, "commit", "-qm", "first"]):
        subprocess.run(["git", *args], cwd=path, check=True, capture_output=True)
    (path / "train.py").write_text("print('train, edited')\n")
    return str(path)


def _true_runs(count: int, prefix: str) -> list[dict]:
    return [{"name": f"{prefix}{i}", "command": "true"} for i in range(count)]


def batch_submit_ms(system: BenchSystem, token: str, project: str, samples: int = 3) -> float:
    """One POST /api/runs/batch of 1,000 `true` runs with auto_start through the real web,
    request to its 201 (the median of `samples`, after a warm-up)."""
    import httpx

    url = f"http://127.0.0.1:{system.port}/api/runs/batch"
    took = []
    with httpx.Client(headers={"X-Auth-Token": token}, timeout=300) as client:
        for n in range(samples + 1):
            body = {"auto_start": True, "workdir": project, "runs": _true_runs(1000, f"b{n}-")}
            started = time.perf_counter()
            response = client.post(url, json=body)
            took.append((time.perf_counter() - started) * 1000)
            if response.status_code != 201 or len(response.json()) != 1000:
                raise RuntimeError(f"batch refused: {response.status_code} {response.text[:300]}")
    return sorted(took[1:])[len(took[1:]) // 2]


def submit_runs_per_s(system: BenchSystem, token: str, project: str, clients: int = 20) -> float:
    """300 POST /api/runs (`true`, auto_start) from `clients` threads at once: runs per
    second until the last 201."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    import httpx

    url = f"http://127.0.0.1:{system.port}/api/runs"
    runs = [{**run, "auto_start": True, "workdir": project} for run in _true_runs(300, "s")]
    local = threading.local()  # a client (its connection) per thread

    def post(run: dict) -> None:
        if not hasattr(local, "client"):
            local.client = httpx.Client(headers={"X-Auth-Token": token}, timeout=120)
        response = local.client.post(url, json=run)
        if response.status_code != 201:
            raise RuntimeError(f"run refused: {response.status_code} {response.text[:300]}")

    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(post, [{**run, "name": f"warm{i}"} for i, run in enumerate(runs[:40])]))
        started = time.perf_counter()
        list(pool.map(post, runs))
        return len(runs) / (time.perf_counter() - started)


def submit_figures(system: BenchSystem, token: str) -> None:
    """The two submission figures, on the web alone (no runagentd runs what they queue);
    the runs they made are deleted after, so no daemon started later runs them."""
    from agents_app.models import Agent
    from scheduler_app.models import Run, ScheduleRequest

    project = _project(system)
    report("batch_submit_1000_ms", batch_submit_ms(system, token, project), "ms")
    report("submit_runs_per_s_20_clients", submit_runs_per_s(system, token, project), "runs/s")
    for model in (ScheduleRequest, Run, Agent):
        model.objects.all().delete()


LOG_TICKS = 80  # lines the run prints, one every 100 ms
TICKER = (
    "import time\n"
    f"for i in range({LOG_TICKS}):\n"
    "    print(f'tick {i} {time.time():.6f}', flush=True)\n"
    "    time.sleep(0.1)\n"
)


def log_to_web_ms(system: BenchSystem, token: str) -> list[float]:
    """Per line a run prints on host gpu-b: from its print to the moment GET
    /api/runs/{id}/logs on the web (host bench-host, which cannot read gpu-b's disk) returns
    it. The client polls every 10 ms, from where it stopped, as the run page does."""
    import httpx

    from scheduler_app.runs import launch as runs

    script = Path(system.tmp.name) / "ticker.py"
    script.write_text(TICKER)
    run = runs.create_run(
        name="ticker", command=f"{sys.executable} -u {script}", gpu_required=0, auto_start=True
    )
    url = f"http://127.0.0.1:{system.port}/api/runs/{run.id}/logs"
    latencies, offset, pending = [], 0, b""
    deadline = time.monotonic() + 60
    with httpx.Client(headers={"X-Auth-Token": token}, timeout=10) as client:
        while len(latencies) < LOG_TICKS and time.monotonic() < deadline:
            chunk = client.get(url, params={"offset": offset, "limit": 1_000_000}).json()
            seen = time.time()
            if chunk["text"] and chunk["host"] != "gpu-b":
                raise RuntimeError("the log was read from the web's own disk, not shipped")
            pending += chunk["text"].encode()
            offset = chunk["next_offset"]
            *lines, pending = pending.split(b"\n")
            for line in lines:
                printed = float(line.split()[2])
                latencies.append((seen - printed) * 1000)
            time.sleep(0.01)
    if len(latencies) < LOG_TICKS:
        raise RuntimeError(f"only {len(latencies)} of {LOG_TICKS} lines were served")
    return latencies[5:]  # the first lines wait for the executor to start shipping


def drain_only(count: int) -> None:
    """The submit → running figures and the drain, without the log and claim figures."""
    system = BenchSystem(gpus="2")
    try:
        system.start_daemon()
        submit_to_running(5)  # warm-up
        placed, started = submit_to_running()
        report("submit_to_running_p50_ms", percentile(placed, 50), "ms")
        report("submit_to_running_p99_ms", percentile(placed, 99), "ms")
        report("submit_to_executor_started_p50_ms", percentile(started, 50), "ms")
        report("submit_to_executor_started_p99_ms", percentile(started, 99), "ms")
        report(f"drain_{count}_queued_on_2_gpus_s", drain_seconds(count), "s")
    finally:
        system.close()


def main(log_only: bool = False, submit_only: bool = False) -> None:
    """Every figure; `python bench/scheduler.py log`: log_to_web's alone; `... submit`: the
    submission figures alone."""
    from bench.harness import TOKEN
    from tests.helpers import free_port

    system = BenchSystem(port=free_port(), gpus="2")
    try:
        system.start_web()
        if not log_only:
            submit_figures(system, TOKEN)
        if submit_only:
            return
        system.start_daemon(host_name="gpu-b")
        latencies = log_to_web_ms(system, TOKEN)
        report("log_to_web_p50_ms", percentile(latencies, 50), "ms")
        report("log_to_web_p99_ms", percentile(latencies, 99), "ms")
        if log_only:
            return
        submit_to_running(5)  # warm-up
        placed, started = submit_to_running()
        report("submit_to_running_p50_ms", percentile(placed, 50), "ms")
        report("submit_to_running_p99_ms", percentile(placed, 99), "ms")
        report("submit_to_executor_started_p50_ms", percentile(started, 50), "ms")
        report("submit_to_executor_started_p99_ms", percentile(started, 99), "ms")
        report("drain_1000_queued_on_2_gpus_s", drain_seconds(), "s")
    finally:
        system.close()
    if log_only or submit_only:
        return
    for gpus in (2, 8):
        report(
            f"claims_per_s_with_1e5_finished_{gpus}_gpu_host", claims_per_second(gpus), "claims/s"
        )
    report("claims_per_s_4_hosts", claims_per_second_hosts(4), "claims/s")


if __name__ == "__main__":
    if sys.argv[1:2] == ["drain"]:
        drain_only(int(sys.argv[2]) if sys.argv[2:] else 1000)
    elif sys.argv[1:] == ["hosts"]:  # the several-hosts figure alone (a minute, not several)
        BenchSystem()
        report("claims_per_s_4_hosts", claims_per_second_hosts(4), "claims/s")
    else:
        main(log_only=sys.argv[1:] == ["log"], submit_only=sys.argv[1:] == ["submit"])
