"""Unmodified MLflow and W&B scripts through the queue (issue 20): the executor points a run
that has no MLflow store or W&B mode of its own into its run dir, its series come from there
(the source on each, a NaN alert), and a run that says where it logs is left alone."""

import sys
import textwrap

import pytest

from agentsys.run_dir import MLFLOW_DIR, run_dir_of
from memory_app.models import MemoryEntry
from scheduler_app.models import Alert, MetricSeries, RunStatus
from tests.helpers import launch_run, run_ended
from tests.runtime_harness import DaemonProcess

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
PY = sys.executable

# Scripts as researchers write them: nothing of AgentSys in them. Each prints where its
# logger was told to log, and ends with a NaN loss.
MLFLOW_SCRIPT = textwrap.dedent(
    """
    import math, os
    import mlflow

    print("URI", os.environ.get("MLFLOW_TRACKING_URI"), flush=True)
    with mlflow.start_run():
        mlflow.log_params({"lr": 0.1, "optimizer": "sgd"})
        for step in range(1, 11):
            mlflow.log_metric("loss", 1.0 / step, step=step)
        mlflow.log_metric("loss", math.nan, step=11)
    """
)
WANDB_SCRIPT = textwrap.dedent(
    """
    import math, os
    import wandb

    print("MODE", os.environ.get("WANDB_MODE"), flush=True)
    run = wandb.init(project="demo", config={"lr": 0.1})
    for step in range(1, 11):
        wandb.log({"loss": 1.0 / step, "acc": step / 10}, step=step)
    wandb.log({"loss": math.nan}, step=11)
    run.finish()
    """
)


@pytest.fixture
def daemon():
    process = DaemonProcess("trackers-host", AGENTSYS_GPUS="", WANDB_SILENT="true")
    yield process
    if process.process.poll() is None:
        process.stop()


@pytest.fixture
def workdir(tmp_path):
    (tmp_path / "train_mlflow.py").write_text(MLFLOW_SCRIPT)
    (tmp_path / "train_wandb.py").write_text(WANDB_SCRIPT)
    return tmp_path


def _finished(run):
    run = run_ended(run, timeout=120)
    assert run.status == RunStatus.DONE, run.error
    return run


def _log(workdir, run) -> str:
    return (run_dir_of(workdir, run.agent_id) / "run.log").read_text()


def test_an_mlflow_script_is_charted_from_the_store_in_its_run_dir(daemon, workdir, api):
    run = _finished(launch_run(workdir, f"{PY} train_mlflow.py"))
    store = run_dir_of(workdir, run.agent_id) / MLFLOW_DIR
    assert f"URI {store.as_uri()}" in _log(workdir, run)
    loss = MetricSeries.objects.get(run=run, key="loss")
    assert loss.source == "mlflow" and loss.points == 11 and loss.non_finite == 1
    assert Alert.objects.filter(run=run).exists()  # the NaN, from MLflow's store
    body = api("get", f"/api/runs/{run.pk}/metrics").json()
    assert {s["key"]: s["source"] for s in body["series"]}["loss"] == "mlflow"
    result = MemoryEntry.objects.get(agent_id=run.agent_id, type="result")
    assert result.data["metrics"]["loss"]["points"] == 11  # what the research loop reads


def test_a_run_with_its_own_mlflow_store_is_left_alone(daemon, workdir, tmp_path_factory):
    own = tmp_path_factory.mktemp("own") / "mlruns"
    env = {"MLFLOW_TRACKING_URI": own.as_uri(), "MLFLOW_ALLOW_FILE_STORE": "true"}
    run = _finished(launch_run(workdir, f"{PY} train_mlflow.py", executor_options={"env": env}))
    assert f"URI {own.as_uri()}" in _log(workdir, run)
    assert list(own.glob("*/*/metrics/loss"))  # it logged where it said
    assert not (run_dir_of(workdir, run.agent_id) / MLFLOW_DIR).exists()
    assert not MetricSeries.objects.filter(run=run, source="mlflow").exists()


def test_a_wandb_script_runs_offline_and_is_charted_from_its_history(daemon, workdir):
    run = _finished(launch_run(workdir, f"{PY} train_wandb.py"))
    assert "MODE offline" in _log(workdir, run)
    loss = MetricSeries.objects.get(run=run, key="loss")
    assert loss.source == "wandb" and loss.points == 11 and loss.non_finite == 1
    assert MetricSeries.objects.get(run=run, key="acc").points == 10
    assert Alert.objects.filter(run=run).exists()  # the NaN, from the offline history
    result = MemoryEntry.objects.get(agent_id=run.agent_id, type="result")
    assert result.data["metrics"]["loss"]["points"] == 11


def test_a_run_that_sets_its_wandb_mode_is_left_alone(daemon, workdir):
    options = {"env": {"WANDB_MODE": "disabled"}}
    run = _finished(launch_run(workdir, f"{PY} train_wandb.py", executor_options=options))
    assert "MODE disabled" in _log(workdir, run)
    assert not MetricSeries.objects.filter(run=run, source="wandb").exists()
