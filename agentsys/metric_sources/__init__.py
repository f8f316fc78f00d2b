"""Where a run's metrics come from: the sources read by the executor's watchdog
(agentsys.metric_sources.watch), each a MetricSource (agentsys.metric_sources.base)."""

from __future__ import annotations

from pathlib import Path

from agentsys.metric_sources.base import MetricSource
from agentsys.metric_sources.jsonl import JsonlSource
from agentsys.metric_sources.mlflow_store import MlflowSource
from agentsys.metric_sources.ownership import event_file_owner
from agentsys.metric_sources.stdout import StdoutSource
from agentsys.metric_sources.tensorboard import TensorBoardSource
from agentsys.metric_sources.wandb_offline import WandbSource
from agentsys.run_dir import LOG_FILE, METRICS_FILE, MLFLOW_DIR, WANDB_DIR


def metric_sources_for(run_dir: Path, config: dict) -> list[MetricSource]:
    """The sources a run's metrics are read from, in the order a metric's series is claimed
    when two sources log the same name (the first to store it keeps it)."""
    workdir = run_dir.parents[2]  # <workdir>/.agents/runs/<id> (agentsys.run_dir)
    return [
        JsonlSource(run_dir / METRICS_FILE),
        TensorBoardSource(workdir, owns=event_file_owner(run_dir)),
        MlflowSource(run_dir / MLFLOW_DIR),
        WandbSource(run_dir / WANDB_DIR),
        StdoutSource(run_dir / LOG_FILE, config.get("metrics_pattern") or None),
    ]
