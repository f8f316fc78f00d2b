"""Unmodified training scripts through the queue (issue 20): a script that logs only with
TensorBoard and one that only prints get their series, the source on each, a NaN alert from
printed lines, the metrics in the run's result, and runs sharing a workdir keep their own
TensorBoard curves."""

import shutil
import sys

import pytest

from memory_app.models import MemoryEntry
from scheduler_app.models import Alert, MetricPoint, MetricSeries, RunStatus
from tests.helpers import REPO, launch_run, run_ended
from tests.runtime_harness import DaemonProcess

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
PY = sys.executable
DEMO = REPO / "researchagent" / "demo_workspace"


@pytest.fixture
def daemon():
    process = DaemonProcess("sources-host", AGENTSYS_GPUS="")
    yield process
    if process.process.poll() is None:
        process.stop()


@pytest.fixture
def workdir(tmp_path):
    for script in ("train_tensorboard.py", "train_prints.py"):
        shutil.copy(DEMO / script, tmp_path / script)
    return tmp_path


def _finished(run):
    run = run_ended(run, timeout=60)
    assert run.status == RunStatus.DONE, run.error
    return run


def test_a_script_that_logs_only_with_tensorboard_is_charted(daemon, workdir, api):
    run = _finished(launch_run(workdir, f"{PY} train_tensorboard.py --steps 100 --sleep 0.01"))
    loss = MetricSeries.objects.get(run=run, key="loss")
    assert loss.source == "tensorboard" and loss.points == 10  # every 10 steps
    assert MetricSeries.objects.get(run=run, key="lr").source == "tensorboard"
    body = api("get", f"/api/runs/{run.pk}/metrics").json()
    assert {s["key"]: s["source"] for s in body["series"]}["loss"] == "tensorboard"
    result = MemoryEntry.objects.get(agent_id=run.agent_id, type="result")
    assert result.data["metrics"]["loss"]["points"] == 10  # what the research loop reads

    again = _finished(launch_run(workdir, f"{PY} train_tensorboard.py --steps 50 --sleep 0.01"))
    # Same workdir, same runs/sgd folder: each run charts its own event file only.
    assert MetricSeries.objects.get(run=again, key="loss").points == 5
    assert MetricSeries.objects.get(run=run, key="loss").points == 10


def test_a_script_that_only_prints_is_charted_and_a_printed_nan_alerts(daemon, workdir):
    run = _finished(launch_run(workdir, f"{PY} train_prints.py --steps 100 --sleep 0.005"))
    loss = MetricSeries.objects.get(run=run, key="loss")
    assert loss.source == "stdout" and loss.points >= 5
    nan = (
        f"{PY} -c \"import sys; [print(f'step {{s}} | loss {{l}}', flush=True) "
        "for s, l in enumerate([2.0, 1.5, float('nan')])]\""
    )
    broken = _finished(launch_run(workdir, nan))
    assert MetricSeries.objects.get(run=broken, key="loss").non_finite == 1
    [alert] = Alert.objects.filter(run=broken)
    assert "NaN" in alert.message or "nan" in alert.message.lower()


def test_what_a_source_cannot_read_is_said_once_on_the_run_page(daemon, workdir, client):
    from django.contrib.auth import get_user_model

    long_line = f"{PY} -c \"print('x' * 100_000); print('step 1 | loss 0.5')\""
    run = _finished(launch_run(workdir, long_line))
    assert MetricSeries.objects.get(run=run, key="loss").points == 1  # the rest goes on
    get_user_model().objects.create_user("reader", password="p" * 12)
    client.login(username="reader", password="p" * 12)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert page.count("Some metrics could not be read") == 1
    assert page.count("stdout: ") == 1


# A Hugging Face Trainer's console over 100 steps, logging every 20: its banner, a tqdm bar
# redrawn with \r, one dict per logging step without the step, the final summary.
TRAINER_SHAPED = r"""
import sys, time
print("***** Running training *****")
print("  Num examples = 1,000")
print("  Total optimization steps = 100", flush=True)
for i in range(1, 6):
    sys.stderr.write(f"\r{i * 20}%|##| {i * 20}/100 [00:0{i}<00:04, 19.2it/s]")
    sys.stderr.flush()
    print({"loss": round(0.7 - 0.05 * i, 2), "learning_rate": 1e-4 * (6 - i) / 5, "epoch": i / 2})
    sys.stdout.flush()
    time.sleep(0.05)
print({"train_runtime": 5.1, "train_loss": 0.55, "epoch": 2.5})
"""


def test_a_trainer_shaped_log_charts_every_key_of_a_line_at_one_step(daemon, workdir):
    (workdir / "trainer_like.py").write_text(TRAINER_SHAPED)
    run = _finished(launch_run(workdir, f"{PY} trainer_like.py"))

    def steps(key):
        found = MetricSeries.objects.get(run=run, key=key)
        return list(
            MetricPoint.objects.filter(series=found).order_by("step").values_list("step", flat=True)
        )

    assert steps("loss") == steps("learning_rate") == [0, 1, 2, 3, 4]
    assert steps("epoch") == [0, 1, 2, 3, 4, 5]
    assert steps("train_loss") == [5]
    keys = set(MetricSeries.objects.filter(run=run).values_list("key", flat=True))
    assert not keys & {"examples", "steps"}  # the banner is not charted
