"""The CPU a run's metric tailing costs while the run writes 1,000 points/s (issue 20), one
figure per source: a real writer (the source's own library, or printed lines) runs as the
executor runs a command, in a run dir of its own with the executor's environment and its
output into run.log, and logs loss and lr at 500 steps/s for DURATION seconds; meanwhile
this process reads the run the way the executor's watchdog does (every source of
`metric_sources_for`, in a MetricsWatch, `collect` every MONITOR_INTERVAL seconds, then once
with final=True after the writer has exited).

The figure is the CPU time of this process (getrusage RUSAGE_SELF: the writer, a child, is
not in it) over the wall time from the writer's first point to the end of the last read,
times 100: the writer, once started up, waits for this process to start its clocks before
it writes its first point. Every point written must have been read, or the bench stops. The
window is a Tailing's instants (tests/integration/test_bench_metrics_sources_points.py checks
they are these)."""

import asyncio
import importlib.util
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from agentsys.agents.executor import ExecutorAgent
from agentsys.metric_sources import metric_sources_for
from agentsys.metric_sources.watch import MetricsWatch
from agentsys.proctree import process_info
from agentsys.run_dir import LOG_FILE, METRICS_POSITION_FILE, run_dir_of, write_pid_file

RATE = 1000  # points/s: loss and lr, so 500 steps/s
DURATION = 6.0  # seconds of writing: two watchdog reads while it writes, then the last
MONITOR_INTERVAL = ExecutorAgent.monitor_interval  # 3 s, the executor's
STEPS = int(RATE / 2 * DURATION)
READY, GO = "ready", "go"  # in the writer's workdir: it is up; this process's clocks started

# Each writer, started up (wandb's and mlflow's start-up is not in the window), touches
# argv[1] and waits for argv[2], made once this process has started its clocks; then it logs
# `steps` steps, paced to RATE against the clock, and writes into argv[1] when it was up, its
# first and last points came (time.time()) and how long the logging took (its teardown,
# wandb's finish, comes after: still in the window).
PACED_LOOP = """
import json, math, pathlib, sys, time
ready, go = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
up = time.time()
ready.touch()
while not go.exists():
    time.sleep(0.001)
first, start = time.time(), time.monotonic()
for step in range(1, {steps} + 1):
    loss = 2.5 * math.exp(-step / 20000)
    {log}
    if step % 10 == 0:
        time.sleep(max(0.0, start + step / {steps_per_s} - time.monotonic()))
seconds, last = time.monotonic() - start, time.time()
ready.write_text(json.dumps({{"up": up, "first": first, "last": last, "seconds": seconds}}))
"""

# source: (its setup, the line that logs a step, its teardown), as a training script has them
WRITERS = {
    "jsonl": (
        "import json, os\n"
        "out = open(os.path.join(os.environ['AGENTSYS_RUN_DIR'], 'agent_metrics.jsonl'), 'a',"
        " buffering=1)\n",
        'out.write(json.dumps({"_step": step, "loss": loss, "lr": 3e-4}) + "\\n")',
        "out.close()\n",
    ),
    # flush_secs=1: the file grows while the run goes (tensorboardX's default is 120 s).
    "tensorboard": (
        "from tensorboardX import SummaryWriter\n"
        "writer = SummaryWriter('runs/bench', flush_secs=1)\n",
        'writer.add_scalar("loss", loss, step); writer.add_scalar("lr", 3e-4, step)',
        "writer.close()\n",
    ),
    "stdout": (
        "",
        'print(f"step={step} loss={loss:.6f} lr=3e-4", flush=True)',
        "",
    ),
    "mlflow": (
        "import mlflow\nrun = mlflow.start_run()\n",
        'mlflow.log_metrics({"loss": loss, "lr": 3e-4}, step=step)',
        "mlflow.end_run()\n",
    ),
    "wandb": (
        "import wandb\nrun = wandb.init(project='bench')\n",
        'run.log({"loss": loss, "lr": 3e-4}, step=step)',
        "run.finish()\n",
    ),
}


def writer_script(source: str, steps: int = STEPS) -> str:
    setup, log, teardown = WRITERS[source]
    loop = PACED_LOOP.format(steps=steps, steps_per_s=RATE // 2, log=log)
    return setup + loop + teardown


def run_environment(run_dir: Path, run_id: str) -> dict[str, str]:
    """What the executor gives a command (ExecutorAgent.environment) that the sources depend
    on: MLflow and W&B log into the run dir. The caller's own W&B/MLflow settings are left
    out, so they cannot send the run elsewhere."""
    env = {
        key: value for key, value in os.environ.items() if not key.startswith(("WANDB_", "MLFLOW_"))
    }
    env.update(
        AGENTSYS_RUN_DIR=str(run_dir),
        WANDB_DIR=str(run_dir / "wandb"),
        WANDB_RUN_ID=run_id,
        WANDB_MODE="offline",
        WANDB_SILENT="true",
        MLFLOW_TRACKING_URI=(run_dir / "mlruns").as_uri(),
        MLFLOW_ALLOW_FILE_STORE="true",
    )
    return env


async def start_writer(source: str, workdir: Path, run_dir: Path, steps: int = STEPS):
    """As the executor starts a command: its own session (the TensorBoard source finds the
    run's event files by it), job.pid written, stdout and stderr into run.log."""
    script = writer_script(source, steps)
    with (run_dir / LOG_FILE).open("ab") as log:
        process = await asyncio.create_subprocess_exec(
            *[sys.executable, "-c", script, str(workdir / READY), str(workdir / GO)],
            cwd=workdir,
            env=run_environment(run_dir, run_dir.name),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    info = process_info(process.pid)
    write_pid_file(run_dir, process.pid, str(info.start_time) if info else "")
    return process


class Counter:
    """The store the watch writes to: counts the points (values other than `_step`,
    `_timestamp`) of each source."""

    def __init__(self) -> None:
        self.points: dict[str, int] = {}

    async def __call__(self, rows: list[dict], source: str) -> None:
        count = sum(1 for row in rows for key in row if not key.startswith("_"))
        self.points[source] = self.points.get(source, 0) + count


@dataclass(frozen=True)
class Tailing:
    """One run's window (time.time()) and what this process did in it."""

    started: float  # the clocks started, the writer up and waiting to write its first point
    ended: float  # the last read (final=True, once the writer had exited) returned
    cpu_s: float  # this process's CPU seconds between the two
    points: int  # the points of the source read in it


def cpu_percent(tailing: Tailing) -> float:
    return 100 * tailing.cpu_s / (tailing.ended - tailing.started)


async def tail_while_writing(
    source: str, workdir: Path, steps: int = STEPS, interval: float = MONITOR_INTERVAL
) -> Tailing:
    """One run read as the executor's watchdog reads it, `interval` apart while the writer
    runs, and the last read as soon as it has exited, as at the end of a run."""
    run_dir = run_dir_of(workdir, f"bench-{source}")
    run_dir.mkdir(parents=True)
    watch = MetricsWatch(metric_sources_for(run_dir, {}), run_dir / METRICS_POSITION_FILE)
    store = Counter()
    process = await start_writer(source, workdir, run_dir, steps)
    exited = asyncio.ensure_future(process.wait())
    try:
        while not (workdir / READY).exists() and not exited.done():
            await asyncio.sleep(0.02)
        cpu_start, started = _cpu_seconds(), time.time()
        (workdir / GO).touch()
        while not (await asyncio.wait([exited], timeout=interval))[0]:
            await watch.collect(store)
        await watch.collect(store, final=True)
        cpu, ended = _cpu_seconds() - cpu_start, time.time()
    finally:
        if not exited.done():
            process.kill()
        await exited
    check_run(source, run_dir, process.returncode, workdir / READY, steps)
    check_read(source, store.points, steps, watch.problems())
    return Tailing(started, ended, cpu, store.points[source])


def check_run(source, run_dir, code, note: Path, steps: int) -> None:
    """Stop the bench unless the writer ran through and wrote at RATE."""
    if code != 0:
        log = (run_dir / LOG_FILE).read_text(errors="replace")[-2000:]
        raise SystemExit(f"{source}: the writer failed ({code}):\n{log}")
    written_per_s = 2 * steps / json.loads(note.read_text())["seconds"]
    if written_per_s < 0.9 * RATE:
        raise SystemExit(f"{source}: the writer wrote {written_per_s:.0f} points/s, not {RATE}")


def check_read(source, points: dict, steps: int, problems: list) -> None:
    """Stop the bench unless every point written was read."""
    if points.get(source) != 2 * steps or problems:
        raise SystemExit(f"{source}: read {points} of {2 * steps} points, {problems}")


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)  # this process only, not the writer
    return usage.ru_utime + usage.ru_stime


def tailing_cpu_percent(source: str) -> tuple[float, int]:
    """(CPU % of the reading process, points read) while a run of `source` writes RATE."""
    with tempfile.TemporaryDirectory(prefix=f"agentsys-bench-tail-{source}-") as tmp:
        tailing = asyncio.run(tail_while_writing(source, Path(tmp)))
    wall = tailing.ended - tailing.started
    print(json.dumps({"source": source, "cpu_s": tailing.cpu_s, "wall_s": wall}), file=sys.stderr)
    return cpu_percent(tailing), tailing.points


def missing_library(source: str) -> str | None:
    """Why `source` cannot be measured here (its library is not installed), else None."""
    module = {"mlflow": "mlflow", "wandb": "wandb"}.get(source)
    if module and importlib.util.find_spec(module) is None:
        return f"{module} is not installed"
    return None


def warm_up_readers() -> None:
    """The W&B source imports wandb's reader at its first read; runagentd pays that once
    for all its runs, so it is not put on one run's account here."""
    if importlib.util.find_spec("wandb") is not None:
        from wandb.proto import wandb_internal_pb2  # noqa: F401
        from wandb.sdk.internal.datastore import DataStore  # noqa: F401
