"""The CPU a run's metric tailing costs while the run writes 1,000 points/s (issue 20), one
figure per source: a real writer (the source's own library, or printed lines) runs as the
executor runs a command, in a run dir of its own with the executor's environment and its
output into run.log, and logs loss and lr at 500 steps/s for DURATION seconds; meanwhile
this process reads the run the way the executor's watchdog does (every source of
`metric_sources_for`, in a MetricsWatch, `collect` every MONITOR_INTERVAL seconds, then once
with final=True after the writer has exited).

The figure is the CPU time of this process (getrusage RUSAGE_SELF: the writer, a child, is
not in it) over the wall time from the writer's first point to the end of the last read,
times 100. Every point written must have been read, or the bench stops."""

import asyncio
import importlib.util
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
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

# Each writer touches argv[1] just before its first point (so wandb's and mlflow's start-up
# is not in the window), then logs STEPS steps, paced to RATE against the clock, and writes
# there how long that took (its teardown, wandb's finish, comes after: still in the window).
PACED_LOOP = """
import math, pathlib, sys, time
pathlib.Path(sys.argv[1]).touch()
start = time.monotonic()
for step in range(1, {steps} + 1):
    loss = 2.5 * math.exp(-step / 20000)
    {log}
    if step % 10 == 0:
        time.sleep(max(0.0, start + step / {steps_per_s} - time.monotonic()))
pathlib.Path(sys.argv[1]).write_text(str(time.monotonic() - start))  # the writing's seconds
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


def writer_script(source: str) -> str:
    setup, log, teardown = WRITERS[source]
    loop = PACED_LOOP.format(steps=STEPS, steps_per_s=RATE // 2, log=log)
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


async def start_writer(source: str, workdir: Path, run_dir: Path, go: Path):
    """As the executor starts a command: its own session (the TensorBoard source finds the
    run's event files by it), job.pid written, stdout and stderr into run.log."""
    with (run_dir / LOG_FILE).open("ab") as log:
        process = await asyncio.create_subprocess_exec(
            *[sys.executable, "-c", writer_script(source), str(go)],
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


async def tail_while_writing(source: str, workdir: Path) -> tuple[float, float, dict]:
    """(reading CPU seconds, wall seconds, points read by source) of one run: a read every
    MONITOR_INTERVAL while the writer runs and the last one as soon as it has exited, as
    the executor's watchdog and its end of run do."""
    run_dir = run_dir_of(workdir, f"bench-{source}")
    run_dir.mkdir(parents=True)
    watch = MetricsWatch(metric_sources_for(run_dir, {}), run_dir / METRICS_POSITION_FILE)
    store, go = Counter(), workdir / "go"
    process = await start_writer(source, workdir, run_dir, go)
    exited = asyncio.ensure_future(process.wait())
    try:
        while not go.exists() and not exited.done():  # its start-up is not in the window
            await asyncio.sleep(0.02)
        cpu_start, wall_start = _cpu_seconds(), time.monotonic()
        while not (await asyncio.wait([exited], timeout=MONITOR_INTERVAL))[0]:
            await watch.collect(store)
        await watch.collect(store, final=True)
        cpu, wall = _cpu_seconds() - cpu_start, time.monotonic() - wall_start
    finally:
        if not exited.done():
            process.kill()
        await exited
    check_run(source, run_dir, process.returncode, go, store.points, watch.problems())
    return cpu, wall, store.points


def check_run(source, run_dir, code, go: Path, points: dict, problems: list) -> None:
    """Stop the bench unless the writer wrote at RATE and every point of it was read."""
    if code != 0:
        log = (run_dir / LOG_FILE).read_text(errors="replace")[-2000:]
        raise SystemExit(f"{source}: the writer failed ({code}):\n{log}")
    written_per_s = 2 * STEPS / float(go.read_text())
    if written_per_s < 0.9 * RATE:
        raise SystemExit(f"{source}: the writer wrote {written_per_s:.0f} points/s, not {RATE}")
    if points.get(source) != 2 * STEPS or problems:
        raise SystemExit(f"{source}: read {points} of {2 * STEPS} points, {problems}")


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)  # this process only, not the writer
    return usage.ru_utime + usage.ru_stime


def tailing_cpu_percent(source: str) -> tuple[float, int]:
    """(CPU % of the reading process, points read) while a run of `source` writes RATE."""
    with tempfile.TemporaryDirectory(prefix=f"agentsys-bench-tail-{source}-") as tmp:
        cpu, wall, points = asyncio.run(tail_while_writing(source, Path(tmp)))
    print(json.dumps({"source": source, "cpu_s": cpu, "wall_s": wall}), file=sys.stderr)
    return 100 * cpu / wall, points[source]


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
