"""Reading cost of each metric source (issue 20): points per second read through the source
from a real file of 200,000 points its usual logger wrote (W&B: 40,000, its logger is slow to
write that many; the figure is per point all the same). One function per source; the goal is
at least 50,000 points/s for TensorBoard and for printed lines. Then, per source, the CPU the
executor's tailing costs while a run writes 1,000 points/s (bench.metrics_tailing)."""

import os
import subprocess
import sys
import tempfile
import time
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


def tensorboard_points_per_s() -> float:
    """tensorboardX's SummaryWriter logs loss and lr at 100,000 steps (one record a point, as
    it writes them); a fresh TensorBoardSource finds the file and reads it all."""
    with tempfile.TemporaryDirectory(prefix="agentsys-bench-tb-") as tmp:
        with SummaryWriter(str(Path(tmp) / "runs" / "bench"), max_queue=1000) as writer:
            for step in range(POINTS // 2):
                writer.add_scalar("loss", 1.0 / (step + 1), step)
                writer.add_scalar("lr", 0.05, step)
        best = 0.0
        for _ in range(TRIES):
            source = TensorBoardSource(Path(tmp))
            started = time.perf_counter()
            rows = source.peek()
            source.advance(len(rows))
            elapsed = time.perf_counter() - started
            read = sum(len(row) - 2 for row in rows)  # all but _step and _timestamp
            if read != POINTS or source.problems:
                raise SystemExit(f"tensorboard: read {read} of {POINTS} points, {source.problems}")
            best = max(best, read / elapsed)
        return best


PRINTER = """
import math
for step in range(1, {lines} + 1):
    print(f"step={{step}} loss={{2.5 * math.exp(-step / 20000):.6f}} lr=3e-4", flush=True)
"""


def stdout_points_per_s(lines: int = POINTS // 2) -> float:
    """A real process prints `step=N loss=X lr=Y` lines into a run.log; a fresh StdoutSource
    reads them all (a point is one value: loss or lr)."""
    with tempfile.TemporaryDirectory() as workdir:
        log = Path(workdir) / "run.log"
        with log.open("ab") as out:
            subprocess.run(
                [sys.executable, "-c", PRINTER.format(lines=lines)], stdout=out, check=True
            )
        source = StdoutSource(log)
        started = time.perf_counter()
        rows = source.peek()
        source.advance(len(rows))
        elapsed = time.perf_counter() - started
    points = sum(len(row) - ("_step" in row) for row in rows)
    if points != 2 * lines:
        raise RuntimeError(f"read {points} points, expected {2 * lines}")
    return points / elapsed


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


def _best_read(make_source, expected: int, name: str) -> float:
    best = 0.0
    for _ in range(TRIES):
        source = make_source()
        started = time.perf_counter()
        rows = source.peek()
        source.advance(len(rows))
        elapsed = time.perf_counter() - started
        read = sum(1 for row in rows for key in row if not key.startswith("_"))
        if read != expected or source.problems:
            raise SystemExit(f"{name}: read {read} of {expected} points, {source.problems}")
        best = max(best, read / elapsed)
    return best


def mlflow_points_per_s(points: int = POINTS) -> float:
    """MLflow's file store, written by mlflow (log_batch of loss and lr); a fresh MlflowSource
    reads it all."""
    with tempfile.TemporaryDirectory(prefix="agentsys-bench-mlflow-") as tmp:
        store = Path(tmp) / "mlruns"
        script = MLFLOW_LOGGER.format(steps=points // 2)
        env = {**os.environ, "MLFLOW_ALLOW_FILE_STORE": "true"}  # as the executor sets it
        subprocess.run([sys.executable, "-c", script, store.as_uri()], check=True, env=env)
        return _best_read(lambda: MlflowSource(store), points, "mlflow")


WANDB_LOGGER = """
import sys
import wandb

run = wandb.init(mode="offline", dir=sys.argv[1], project="bench")
for step in range({steps}):
    run.log({{"loss": 1.0 / (step + 1), "lr": 0.05}}, step=step)
run.finish()
"""


def wandb_points_per_s(points: int = 40_000) -> float:
    """An offline W&B run, written by wandb (loss and lr a step); a fresh WandbSource reads its
    history all (40,000 points: wandb's own logging is the slow part here)."""
    with tempfile.TemporaryDirectory(prefix="agentsys-bench-wandb-") as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
        env["WANDB_SILENT"] = "true"
        script = WANDB_LOGGER.format(steps=points // 2)
        subprocess.run([sys.executable, "-c", script, tmp], check=True, env=env)
        return _best_read(lambda: WandbSource(Path(tmp)), points, "wandb")


def main() -> None:
    report("tensorboard_points_per_s", tensorboard_points_per_s(), "points/s")
    report("mlflow_points_per_s", mlflow_points_per_s(), "points/s")
    report("wandb_points_per_s", wandb_points_per_s(), "points/s")
    report("stdout_points_per_s", stdout_points_per_s(), "points/s")
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
