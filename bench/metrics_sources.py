"""Reading cost of each metric source (issue 20): points per second read through the source
from a real file of 200,000 points its usual logger wrote (W&B: 40,000, its logger is slow to
write that many; the figure is per point all the same). One function per source; the goal is
at least 50,000 points/s for TensorBoard and for printed lines. Then, per source, the CPU the
executor's tailing costs while a run writes 1,000 points/s (bench.metrics_tailing).

Each read is a fresh source's peek() and advance() over the finished files, timed from just
before the peek to advance's return; storing the points is not in it. The best of TRIES reads
is reported (tests/integration/test_bench_metrics_sources_points.py checks the instants)."""

import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tensorboardX import SummaryWriter

from agentsys.metric_sources.mlflow_store import MlflowSource
from agentsys.metric_sources.stdout import StdoutSource
from agentsys.metric_sources.tensorboard import TensorBoardSource
from agentsys.metric_sources.wandb_offline import WandbSource
from bench import metrics_tailing
from bench._report import report

POINTS = 200_000
TRIES = 3  # the best of: the machine is shared, the slowest tries measure the neighbours


@dataclass(frozen=True)
class Read:
    """One fresh source's read of its finished files (time.time())."""

    began: float  # just before its first peek()
    ended: float  # advance() past every row peeked has returned
    points: int  # the values in the rows peeked (not _step, _timestamp and the like)


def points_per_s(read: Read) -> float:
    return read.points / (read.ended - read.began)


def best_points_per_s(reads: list[Read]) -> float:
    return max(points_per_s(read) for read in reads)


def read_all(source, expected: int) -> Read:
    """`source`, fresh, reads its finished files whole; stops the bench unless it read all
    `expected` points and said no problem."""
    began = time.time()
    rows = source.peek()
    source.advance(len(rows))
    ended = time.time()
    points = sum(1 for row in rows for key in row if not key.startswith("_"))
    if points != expected or source.problems:
        raise SystemExit(f"{source.name}: read {points} of {expected}, {source.problems}")
    return Read(began, ended, points)


def tensorboard_reads(points: int = POINTS, tries: int = TRIES) -> list[Read]:
    """tensorboardX's SummaryWriter logs loss and lr at points/2 steps (one record a point,
    as it writes them); a fresh TensorBoardSource finds the file and reads it all."""
    with tempfile.TemporaryDirectory(prefix="agentsys-bench-tb-") as tmp:
        with SummaryWriter(str(Path(tmp) / "runs" / "bench"), max_queue=1000) as writer:
            for step in range(points // 2):
                writer.add_scalar("loss", 1.0 / (step + 1), step)
                writer.add_scalar("lr", 0.05, step)
        return [read_all(TensorBoardSource(Path(tmp)), points) for _ in range(tries)]


PRINTER = """
import math
for step in range(1, {lines} + 1):
    print(f"step={{step}} loss={{2.5 * math.exp(-step / 20000):.6f}} lr=3e-4", flush=True)
"""


def stdout_reads(lines: int = POINTS // 2, tries: int = TRIES) -> list[Read]:
    """A real process prints `step=N loss=X lr=Y` lines into a run.log; a fresh StdoutSource
    reads them all (a point is one value: loss or lr)."""
    with tempfile.TemporaryDirectory() as workdir:
        log = Path(workdir) / "run.log"
        with log.open("ab") as out:
            subprocess.run(
                [sys.executable, "-c", PRINTER.format(lines=lines)], stdout=out, check=True
            )
        return [read_all(StdoutSource(log), 2 * lines) for _ in range(tries)]


MLFLOW_LOGGER = """
import sys
import mlflow
from mlflow.entities import Metric

mlflow.set_tracking_uri(sys.argv[1])
with mlflow.start_run() as run:
    client, stamp = mlflow.MlflowClient(), 1732550000000
    for start in range(1, {steps} + 1, 500):  # log_batch: the file store appends each line
        steps = range(start, min(start + 500, {steps} + 1))
        metrics = [Metric("loss", 1.0 / s, stamp + s, s) for s in steps]
        metrics += [Metric("lr", 0.05, stamp + s, s) for s in steps]
        client.log_batch(run.info.run_id, metrics=metrics)
"""


def mlflow_reads(points: int = POINTS, tries: int = TRIES) -> list[Read]:
    """MLflow's file store, written by mlflow (log_batch of loss and lr); a fresh MlflowSource
    reads it all."""
    with tempfile.TemporaryDirectory(prefix="agentsys-bench-mlflow-") as tmp:
        store = Path(tmp) / "mlruns"
        script = MLFLOW_LOGGER.format(steps=points // 2)
        env = {**os.environ, "MLFLOW_ALLOW_FILE_STORE": "true"}  # as the executor sets it
        subprocess.run([sys.executable, "-c", script, store.as_uri()], check=True, env=env)
        return [read_all(MlflowSource(store), points) for _ in range(tries)]


WANDB_LOGGER = """
import sys
import wandb

run = wandb.init(mode="offline", dir=sys.argv[1], project="bench")
for step in range({steps}):
    run.log({{"loss": 1.0 / (step + 1), "lr": 0.05}}, step=step)
run.finish()
"""


def wandb_reads(points: int = 40_000, tries: int = TRIES) -> list[Read]:
    """An offline W&B run, written by wandb (loss and lr a step); a fresh WandbSource reads its
    history all (40,000 points: wandb's own logging is the slow part here)."""
    with tempfile.TemporaryDirectory(prefix="agentsys-bench-wandb-") as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
        env["WANDB_SILENT"] = "true"
        script = WANDB_LOGGER.format(steps=points // 2)
        subprocess.run([sys.executable, "-c", script, tmp], check=True, env=env)
        return [read_all(WandbSource(Path(tmp)), points) for _ in range(tries)]


def main() -> None:
    report("tensorboard_points_per_s", best_points_per_s(tensorboard_reads()), "points/s")
    report("mlflow_points_per_s", best_points_per_s(mlflow_reads()), "points/s")
    report("wandb_points_per_s", best_points_per_s(wandb_reads()), "points/s")
    report("stdout_points_per_s", best_points_per_s(stdout_reads()), "points/s")
    report_tailing_cpu()


def report_tailing_cpu() -> None:
    metrics_tailing.warm_up_readers()
    for source in ("jsonl", "tensorboard", "stdout", "mlflow", "wandb"):
        reason = metrics_tailing.missing_library(source)
        if reason:
            print(f"{source}_tailing_cpu_percent_at_1000_pts_s skipped: {reason}", file=sys.stderr)
            continue
        percent, points = metrics_tailing.tailing_cpu_percent(source)
        report(f"{source}_tailing_cpu_percent_at_1000_pts_s", percent, "%")
        report(f"{source}_tailing_points_read", points, "points")


if __name__ == "__main__":
    main()
