"""Scheduler figures, each read between two instants that bench/scheduler_points.py names
(tests/integration/test_bench_scheduler_points.py checks that each is the point its name says):

- submit_to_running_p50_ms, _p99_ms: a run submitted (its request's created_at) → the claim
  that placed it on GPUs (the request's started_at), through a real runagentd;
- submit_to_executor_started_p50_ms, _p99_ms: the same submit → the first event its executor
  emits itself, in runagentd, once it is up and its command has started (run_started);
- drain_1000_queued_on_2_gpus_s: a batch of 1,000 queued mock runs submitted → the last
  one's finished_at;
- log_to_web_p50_ms, _p99_ms: a line printed by a run on host gpu-b → the GET on the web
  (another host, which reads the log from PostgreSQL) that returned it answered;
- batch_submit_1000_ms: one POST /api/runs/batch of 1,000 runs sent → its 201;
- submit_runs_per_s_20_clients: 300 POST /api/runs from 20 clients, the first sent → the
  last 201;
- claims_per_s_with_1e5_finished_{2,8}_gpu_host, claims_per_s_4_hosts and
  run_ends_per_s_4_hosts: bench/scheduler_claims.py.

`python bench/scheduler.py hosts` measures the four-hosts figure alone, `python
bench/scheduler.py log` the log figure alone, `python bench/scheduler.py submit` the two
submission figures alone, `python bench/scheduler.py drain [N]` the submit latencies and the
drain of N (default 1,000) queued runs alone."""

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._report import percentile, report
from bench.harness import BenchSystem
from bench.scheduler_claims import claims_per_second, claims_per_second_hosts
from bench.scheduler_points import (
    Drain,
    Posts,
    RunPoints,
    drain_s,
    line_to_web_ms,
    post_ms,
    posts_per_s,
    run_points,
    submit_to_executor_started_ms,
    submit_to_running_ms,
)

MOCK = {"backend": "mock", "mock_delay": 0}
ENDED = ("done", "failed", "stopped", "lost", "cancelled", "rejected")


def _wait(predicate, timeout=120.0, interval=0.002):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError("timed out")
        time.sleep(interval)


def submit_to_running(samples: int = 50) -> list[RunPoints]:
    """`samples` runs of `true` on 1 GPU, one at a time, each one's instants read once it has
    ended. A command, not the mock backend: a mock executor emits nothing of its own before
    its end, so it has no first event to time."""
    from scheduler_app.models import ScheduleRequest
    from scheduler_app.runs import launch as runs

    points = []
    for _ in range(samples):
        run = runs.create_run(name="b", command="true", gpu_required=1, auto_start=True)
        request = ScheduleRequest.objects.filter(agent_id=run.agent_id)
        _wait(lambda r=request: r.filter(status__in=ENDED).exists())
        points.append(run_points(run.agent_id))
    return points


def report_submit_to_running(points: list[RunPoints]) -> None:
    placed = [submit_to_running_ms(run) for run in points]
    started = [submit_to_executor_started_ms(run) for run in points]
    report("submit_to_running_p50_ms", percentile(placed, 50), "ms")
    report("submit_to_running_p99_ms", percentile(placed, 99), "ms")
    report("submit_to_executor_started_p50_ms", percentile(started, 50), "ms")
    report("submit_to_executor_started_p99_ms", percentile(started, 99), "ms")


def drain(count: int = 1000) -> Drain:
    """A sweep of `count` 1-GPU runs queued at once (one batch, as a script or a loop sends
    it), from the submit until the last has ended: on 2 GPUs, with the mock backend, what is
    measured is AgentSys's own bookkeeping per run."""
    from django.db.models import Max

    from scheduler_app.models import Run
    from scheduler_app.runs import batch as run_batch

    submitted = time.time()
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
    last = Run.objects.filter(pk__in=ids).aggregate(last=Max("finished_at"))["last"]
    return Drain(submitted, last)


def script_project(folder: Path) -> str:
    """A script's project: a small git work tree with an uncommitted change, so that each run
    made records its code (commit and patch), as a real one does."""
    import subprocess

    path = folder / "project"
    path.mkdir()
    identity = ["-c", "user.name=bench", "-c", "user.email=bench@bench"]
    (path / "train.py").write_text("print('train')\n")
    for args in (["init", "-q"], ["add", "-A"], [*identity, "commit", "-qm", "first"]):
        subprocess.run(["git", *args], cwd=path, check=True, capture_output=True)
    (path / "train.py").write_text("print('train, edited')\n")
    return str(path)


def _true_runs(count: int, prefix: str) -> list[dict]:
    return [{"name": f"{prefix}{i}", "command": "true"} for i in range(count)]


def batch_posts(
    web: str, token: str, project: str, size: int = 1000, samples: int = 3
) -> list[Posts]:
    """`samples` POST /api/runs/batch of `size` `true` runs with auto_start through the real
    web at `web` (its base URL), each from its request sent to its 201, after a warm-up."""
    import httpx

    timed = []
    with httpx.Client(headers={"X-Auth-Token": token}, timeout=300) as client:
        for n in range(samples + 1):
            body = {"auto_start": True, "workdir": project, "runs": _true_runs(size, f"b{n}-")}
            sent = time.time()
            response = client.post(f"{web}/api/runs/batch", json=body)
            timed.append(Posts(1, sent, time.time()))
            if response.status_code != 201 or len(response.json()) != size:
                raise RuntimeError(f"batch refused: {response.status_code} {response.text[:300]}")
    return timed[1:]


def submit_posts(
    web: str, token: str, project: str, count: int = 300, clients: int = 20, warm: int = 40
) -> Posts:
    """`count` POST /api/runs (`true`, auto_start) from `clients` threads at once, after
    `warm` of them to open the connections: the first sent, the last 201 received."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    import httpx

    runs = [{**run, "auto_start": True, "workdir": project} for run in _true_runs(count, "s")]
    local = threading.local()  # a client (its connection) per thread

    def post(run: dict) -> None:
        if not hasattr(local, "client"):
            local.client = httpx.Client(headers={"X-Auth-Token": token}, timeout=120)
        response = local.client.post(f"{web}/api/runs", json=run)
        if response.status_code != 201:
            raise RuntimeError(f"run refused: {response.status_code} {response.text[:300]}")

    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(post, [{**run, "name": f"warm{i}"} for i, run in enumerate(runs[:warm])]))
        sent = time.time()
        list(pool.map(post, runs))
        return Posts(len(runs), sent, time.time())


def submit_figures(system: BenchSystem, token: str) -> None:
    """The two submission figures, on the web alone (no runagentd runs what they queue);
    the runs they made are deleted after, so no daemon started later runs them."""
    from agents_app.models import Agent
    from scheduler_app.models import Run, ScheduleRequest

    web, project = f"http://127.0.0.1:{system.port}", script_project(Path(system.tmp.name))
    batches = [post_ms(posts) for posts in batch_posts(web, token, project)]
    report("batch_submit_1000_ms", statistics.median_low(batches), "ms")
    posts = submit_posts(web, token, project)
    report("submit_runs_per_s_20_clients", posts_per_s(posts), "runs/s")
    for model in (ScheduleRequest, Run, Agent):
        model.objects.all().delete()


LOG_TICKS = 80  # lines the run prints, one every 100 ms
SHIPPING_LINES = 5  # the first lines wait for the executor to start shipping: not counted


def _ticker(ticks: int) -> str:
    return (
        "import time\n"
        f"for i in range({ticks}):\n"
        "    print(f'tick {i} {time.time():.6f}', flush=True)\n"
        "    time.sleep(0.1)\n"
    )


def log_lines(
    web: str, token: str, folder: Path, ticks: int = LOG_TICKS, host: str = "gpu-b"
) -> list[tuple[float, float]]:
    """Per line a run prints on `host` (a runagentd's): (the time.time() it printed in the
    line, the time.time() at which GET /api/runs/{id}/logs on the web at `web`, which cannot
    read `host`'s disk, answered with it). The client polls every 10 ms, from where it
    stopped, as the run page does."""
    import httpx

    from scheduler_app.runs import launch as runs

    script = folder / "ticker.py"
    script.write_text(_ticker(ticks))
    run = runs.create_run(
        name="ticker", command=f"{sys.executable} -u {script}", gpu_required=0, auto_start=True
    )
    lines, offset, pending = [], 0, b""
    deadline = time.monotonic() + 60
    with httpx.Client(headers={"X-Auth-Token": token}, timeout=10) as client:
        while len(lines) < ticks and time.monotonic() < deadline:
            params = {"offset": offset, "limit": 1_000_000}
            chunk = client.get(f"{web}/api/runs/{run.id}/logs", params=params).json()
            served = time.time()
            if chunk["text"] and chunk["host"] != host:
                raise RuntimeError("the log was read from the web's own disk, not shipped")
            pending += chunk["text"].encode()
            offset = chunk["next_offset"]
            *complete, pending = pending.split(b"\n")
            lines += [(float(line.split()[2]), served) for line in complete]
            time.sleep(0.01)
    if len(lines) < ticks:
        raise RuntimeError(f"only {len(lines)} of {ticks} lines were served")
    return lines


def log_to_web_ms(lines: list[tuple[float, float]]) -> list[float]:
    return [line_to_web_ms(printed, served) for printed, served in lines[SHIPPING_LINES:]]


def drain_only(count: int) -> None:
    """The submit → running figures and the drain, without the log and claim figures."""
    system = BenchSystem(gpus="2")
    try:
        system.start_daemon()
        submit_to_running(5)  # warm-up
        report_submit_to_running(submit_to_running())
        report(f"drain_{count}_queued_on_2_gpus_s", drain_s(drain(count)), "s")
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
        web, folder = f"http://127.0.0.1:{system.port}", Path(system.tmp.name)
        latencies = log_to_web_ms(log_lines(web, TOKEN, folder))
        report("log_to_web_p50_ms", percentile(latencies, 50), "ms")
        report("log_to_web_p99_ms", percentile(latencies, 99), "ms")
        if log_only:
            return
        submit_to_running(5)  # warm-up
        report_submit_to_running(submit_to_running())
        report("drain_1000_queued_on_2_gpus_s", drain_s(drain()), "s")
    finally:
        system.close()
    if log_only or submit_only:
        return
    for gpus in (2, 8):
        report(
            f"claims_per_s_with_1e5_finished_{gpus}_gpu_host", claims_per_second(gpus), "claims/s"
        )
    report_hosts(4)


def report_hosts(hosts: int) -> None:
    claims, ends = claims_per_second_hosts(hosts)
    report(f"claims_per_s_{hosts}_hosts", claims, "claims/s")
    report(f"run_ends_per_s_{hosts}_hosts", ends, "ends/s")


if __name__ == "__main__":
    if sys.argv[1:2] == ["drain"]:
        drain_only(int(sys.argv[2]) if sys.argv[2:] else 1000)
    elif sys.argv[1:] == ["hosts"]:  # the several-hosts figure alone (a minute, not several)
        BenchSystem()
        report_hosts(4)
    else:
        main(log_only=sys.argv[1:] == ["log"], submit_only=sys.argv[1:] == ["submit"])
