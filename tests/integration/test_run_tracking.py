"""What a script's trackers know about the run besides its points (issue 20): the params it
logged (MLflow params and tags, W&B config, TensorBoard hparams) and the online tracker run it
printed go onto the run, its API, its page and the report the chat gets; a sweep's
metrics_pattern reads its runs' printed lines."""

import sys
import textwrap

import pytest

from agentsys.chat.reports import child_report_message
from runtime_app.chat_context import child_report
from scheduler_app.models import MetricSeries, RunStatus, Sweep
from tests.helpers import launch_run, run_ended
from tests.runtime_harness import DaemonProcess

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
PY = sys.executable

SCRIPTS = {
    "train_mlflow.py": """
        import mlflow

        with mlflow.start_run():
            mlflow.log_params({"lr": 0.1, "optimizer": "sgd"})
            mlflow.set_tag("team", "vision")
            for step in range(1, 4):
                mlflow.log_metric("loss", 1.0 / step, step=step)
        """,
    "train_wandb.py": """
        import wandb

        run = wandb.init(project="demo", config={"lr": 0.01, "layers": 4})
        for step in range(1, 4):
            wandb.log({"loss": 1.0 / step}, step=step)
        run.finish()
        """,
    "train_hparams.py": """
        from tensorboardX import SummaryWriter

        with SummaryWriter("runs/exp") as writer:
            for step in range(1, 4):
                writer.add_scalar("loss", 1.0 / step, step)
            writer.add_hparams({"lr": 0.2, "batch": 64}, {"hparam/final_loss": 1 / 3})
        """,
    # An online W&B run as wandb prints it (its own printer and footer); the server is the
    # one part not here, so the script renders wandb's footer instead of calling wandb.init.
    "train_online.py": """
        from wandb.sdk import wandb_settings
        from wandb.sdk.lib import printer as wandb_printer
        from wandb.sdk.wandb_run import Run

        settings = wandb_settings.Settings(
            mode="online", entity="ada", project="mnist", run_id="abc123", run_name="sgd",
            base_url="https://api.wandb.ai",
        )
        Run._footer_sync_info(settings=settings, printer=wandb_printer.new_printer(settings))
        print("step 1 | loss 0.5", flush=True)
        """,
    "train_custom.py": """
        for it in range(1, 6):
            print(f"it {it} -> cost {10 - it}", flush=True)
        """,
}
ONLINE_URL = "https://wandb.ai/ada/mnist/runs/abc123"


@pytest.fixture
def daemon():
    process = DaemonProcess("tracking-host", AGENTSYS_GPUS="", WANDB_SILENT="true")
    yield process
    if process.process.poll() is None:
        process.stop()


@pytest.fixture
def workdir(tmp_path):
    for name, text in SCRIPTS.items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    return tmp_path


def _done(run):
    run = run_ended(run, timeout=120)
    assert run.status == RunStatus.DONE, run.error
    return run


def test_params_the_trackers_logged_are_on_the_run_its_api_and_its_page(
    daemon, workdir, api, client, django_user_model, tmp_path_factory
):
    mlflow = launch_run(workdir, f"{PY} train_mlflow.py")
    wandb = launch_run(workdir, f"{PY} train_wandb.py")
    # A workdir of its own: tensorboardX names its files without a pid, and of runs started
    # together in one workdir a file whose writer exited before any run looked goes to the
    # run started last (agentsys.metric_sources.ownership), which need not be this one.
    # Not a folder inside the first: the other runs' TensorBoard sources would read it too.
    elsewhere = tmp_path_factory.mktemp("tensorboard-run")
    (elsewhere / "train_hparams.py").write_text((workdir / "train_hparams.py").read_text())
    hparams = launch_run(elsewhere, f"{PY} train_hparams.py")
    mlflow, wandb, hparams = _done(mlflow), _done(wandb), _done(hparams)

    assert {"lr": 0.1, "optimizer": "sgd", "tag.team": "vision"}.items() <= (
        mlflow.logged_params.items()
    )
    assert {"lr": 0.01, "layers": 4}.items() <= wandb.logged_params.items()
    assert {"lr": 0.2, "batch": 64}.items() <= hparams.logged_params.items()
    assert api("get", f"/api/runs/{mlflow.pk}").json()["logged_params"]["optimizer"] == "sgd"

    django_user_model.objects.create_user("reader", password="p" * 12)
    client.login(username="reader", password="p" * 12)
    page = client.get(f"/runs/{wandb.pk}/").content.decode()
    assert "Logged by the script" in page and "layers" in page

    # The chat's L1 hears of the run's metrics and params when it ends.
    message = child_report_message(child_report(mlflow.agent_id))
    assert "- loss: last 0.333333, min 0.333333, max 1 over 3 points (to step 3), from mlflow" in (
        message
    )
    assert "optimizer=sgd" in message


def test_an_online_tracker_run_is_linked_from_the_run(
    daemon, workdir, api, client, django_user_model
):
    run = _done(launch_run(workdir, f"{PY} train_online.py"))
    assert run.tracker_urls == {"wandb": ONLINE_URL}
    assert api("get", f"/api/runs/{run.pk}").json()["tracker_urls"] == {"wandb": ONLINE_URL}
    django_user_model.objects.create_user("reader", password="p" * 12)
    client.login(username="reader", password="p" * 12)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert f'href="{ONLINE_URL}"' in page and "the W&amp;B run" in page
    assert MetricSeries.objects.get(run=run, key="loss").points == 1  # its prints still read


def test_a_sweeps_metrics_pattern_reads_its_runs_printed_lines(daemon, workdir):
    sweep = Sweep.objects.create(
        name="custom", metrics_pattern=r"it (?P<step>\d+) -> cost (?P<cost>\S+)"
    )
    run = _done(launch_run(workdir, f"{PY} train_custom.py", sweep_id=sweep.id))
    cost = MetricSeries.objects.get(run=run, key="cost")
    assert cost.points == 5 and cost.last_value == 5 and cost.last_step == 5
    own = r"cost (?P<price>\S+)"
    mine = _done(
        launch_run(
            workdir,
            f"{PY} train_custom.py",
            sweep_id=sweep.id,
            executor_options={"metrics_pattern": own},
        )
    )
    assert MetricSeries.objects.filter(run=mine, key="price").exists()  # its own pattern wins
    assert not MetricSeries.objects.filter(run=mine, key="cost").exists()
