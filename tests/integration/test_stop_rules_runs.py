"""Issue 39 §1 against real parts: a real runagentd runs real scripts whose metrics go wrong,
and each run's stop rule stops it within seconds of the row that met it, the run ending
`stopped` with `stopped_by` saying the rule and the value, on its page and in the API.

One runagentd runs every case at once (a daemon's start is most of a case's time): a JSONL
loss that diverges, a printed NaN, a wall-clock limit taken from the run's sweep, and a run
whose rule is never met, which ends `done` as if it had none."""

import sys

import pytest

from scheduler_app.models import MetricPoint, RunStatus, Sweep
from tests.helpers import launch_run, run_ended
from tests.runtime_harness import DaemonProcess

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
PY = sys.executable

# 0.5 until step 30, then 3.71: one row meets `loss > 2.0`, at a step known in advance. It
# would go on for a minute: only its rule ends it in the test's time.
DIVERGES = """
import json, os, time
path = os.path.join(os.environ["AGENTSYS_RUN_DIR"], "agent_metrics.jsonl")
with open(path, "a") as out:
    for step in range(1200):
        loss = 0.5 if step < 30 else 3.71
        out.write(json.dumps({"_step": step, "_timestamp": time.time(), "loss": loss}) + "\\n")
        out.flush()
        time.sleep(0.05)
"""
PRINTS_NAN = """
import time
for step in range(1200):
    loss = "nan" if step >= 15 else f"{1.0 / (step + 1):.4f}"
    print(f"step {step} | loss {loss}", flush=True)
    time.sleep(0.05)
"""
FINE = """
import json, os
path = os.path.join(os.environ["AGENTSYS_RUN_DIR"], "agent_metrics.jsonl")
with open(path, "a") as out:
    for step in range(20):
        out.write(json.dumps({"_step": step, "loss": 1.0 / (step + 1)}) + "\\n")
"""
SECONDS_TO_STOP = 5.0  # a look a second, the store, the stop's SIGTERM: well under this


@pytest.fixture
def daemon():
    process = DaemonProcess("stop-rules-host", AGENTSYS_GPUS="")
    yield process
    if process.process.poll() is None:
        process.stop()


def test_each_rule_stops_its_run_and_says_why(daemon, tmp_path, client, django_user_model):
    for name, text in (("diverges.py", DIVERGES), ("prints.py", PRINTS_NAN), ("fine.py", FINE)):
        (tmp_path / name).write_text(text)
    sweep = Sweep.objects.create(name="timed", stop_when=[{"wall_seconds": 1}])
    above = {"metric": "loss", "above": 2.0, "after_step": 10}
    diverging = launch_run(tmp_path, f"{PY} diverges.py", executor_options={"stop_when": [above]})
    nan = launch_run(
        tmp_path,
        f"{PY} prints.py",
        executor_options={"stop_when": [{"metric": "loss", "nan": True}]},
    )
    timed = launch_run(tmp_path, "sleep 60", sweep_id=sweep.pk)
    fine = launch_run(
        tmp_path, f"{PY} fine.py", executor_options={"stop_when": [above, {"wall_seconds": 60}]}
    )

    diverging = run_ended(diverging, timeout=30)
    assert diverging.status == RunStatus.STOPPED, diverging.error
    assert diverging.stopped_by == "loss > 2.0 after step 10: 3.71 at step 30"
    # From the row written to the run stopped (its processes ended, its end recorded).
    written = MetricPoint.objects.get(series__run=diverging, series__key="loss", step=30).time
    assert (diverging.finished_at - written).total_seconds() < SECONDS_TO_STOP
    assert not MetricPoint.objects.filter(series__run=diverging, step__gt=30 + 60).exists()

    nan = run_ended(nan, timeout=30)
    assert nan.status == RunStatus.STOPPED
    assert nan.stopped_by == "loss is NaN or inf: nan at step 15"

    timed = run_ended(timed, timeout=30)
    assert timed.status == RunStatus.STOPPED
    assert timed.stopped_by.startswith("wall time >= 1 s: ")
    assert (timed.finished_at - timed.started_at).total_seconds() < SECONDS_TO_STOP

    fine = run_ended(fine, timeout=30)
    assert (fine.status, fine.stopped_by) == (RunStatus.DONE, "")

    django_user_model.objects.create_user("ada", password="x" * 12)
    client.login(username="ada", password="x" * 12)
    page = client.get(f"/runs/{diverging.pk}/").content.decode()
    assert "Stopped by its rule: <code>loss &gt; 2.0 after step 10: 3.71 at step 30</code>" in page
