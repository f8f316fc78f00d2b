"""Issue 39 against real parts: a run's metric files are read when they change, not when a
timer says. A real runagentd runs scripts that write one row and wait until the executor has
stored it (its metrics.pos, saved after each store, changes) before writing the next; ROWS such
rounds then a row that meets the run's rule. On the timer (a look a second for a run with a
stop rule) that takes ROWS seconds at least, longer than the test waits; looked at on change,
each round is one look, and the run is stopped by its rule, which `stopped_by` says.

One JSONL run, and one TensorBoard run whose event file is made in a folder that does not
exist when its executor starts watching (a logdir made by the script)."""

import sys

import pytest

from scheduler_app.models import MetricPoint, RunStatus
from tests.helpers import launch_run, run_ended
from tests.runtime_harness import DaemonProcess

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
PY = sys.executable
ROWS = 40  # rounds: >= 40 s on the timer, a few seconds on change
WAIT = 35  # seconds the test gives each run to be stopped

HANDSHAKE = """
import json, os, sys, time
run_dir = os.environ["AGENTSYS_RUN_DIR"]
pos = os.path.join(run_dir, "metrics.pos")

def stored(before):
    # the executor saved a new position: the row just written is stored
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            now = open(pos).read()
        except OSError:
            now = None
        if now and now != before:
            return now
        time.sleep(0.01)
    sys.exit("no look stored the row")
"""
JSONL = (
    HANDSHAKE
    + """
last = None
with open(os.path.join(run_dir, "agent_metrics.jsonl"), "a", buffering=1) as out:
    for step in range({rows}):
        out.write(json.dumps({{"_step": step, "loss": 0.5}}) + "\\n")
        last = stored(last)
    out.write(json.dumps({{"_step": {rows}, "loss": 3.0}}) + "\\n")
time.sleep(120)
"""
)
TENSORBOARD = (
    HANDSHAKE
    + """
from tensorboardX import SummaryWriter
# tensorboardX's flush() does not wait for its queue: its thread writes within flush_secs
logdir = os.path.join("logs", os.path.basename(run_dir), "made-later")
writer = SummaryWriter(logdir, flush_secs=0.01)
last = None
for step in range({rows}):
    writer.add_scalar("loss", 0.5, step)
    writer.flush()
    last = stored(last)
writer.add_scalar("loss", 3.0, {rows})
writer.flush()
time.sleep(120)
"""
)
RULE = {"metric": "loss", "above": 2.0}


@pytest.fixture
def daemon():
    process = DaemonProcess("on-change-host", AGENTSYS_GPUS="")
    yield process
    if process.process.poll() is None:
        process.stop()


def test_rows_are_read_as_written_and_the_rule_stops_the_run(daemon, tmp_path):
    (tmp_path / "jsonl.py").write_text(JSONL.format(rows=ROWS))
    (tmp_path / "tb.py").write_text(TENSORBOARD.format(rows=ROWS))
    runs = {
        "jsonl": launch_run(tmp_path, f"{PY} jsonl.py", executor_options={"stop_when": [RULE]}),
        "tensorboard": launch_run(tmp_path, f"{PY} tb.py", executor_options={"stop_when": [RULE]}),
    }
    for source, run in runs.items():
        run = run_ended(run, timeout=WAIT)
        assert run.status == RunStatus.STOPPED, (source, run.status, run.error)
        assert run.stopped_by == f"loss > 2.0: 3 at step {ROWS}", source
        stored = MetricPoint.objects.filter(series__run=run, series__key="loss")
        assert stored.count() == ROWS + 1, source  # each round's row, then the one that met it
