"""bench/stop_rule_latency.py's figure times what its name says (issue 40 §3), on one run
through a real runagentd: from the instant the run's script wrote the row that meets its stop
rule to the instant its SIGTERM handler ran, both noted by the script itself."""

from __future__ import annotations

import json

import pytest

from bench import stop_rule_latency
from bench.stop_rule_latency import RULE, stop_rule_latency_ms
from events_app.models import Event
from scheduler_app.models import Run
from tests.runtime_harness import DaemonProcess

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
FINE_ROWS_S = 1.5  # the script's ten fine rows and its pause before the row that meets it


@pytest.fixture
def workdir(tmp_path, settings):
    settings.AGENTSYS_WORKDIR = tmp_path
    return tmp_path


def test_stop_rule_latency_runs_from_the_row_written_to_the_sigterm(workdir):
    daemon = DaemonProcess("stop-points", AGENTSYS_WORKDIR=str(workdir))
    try:
        [points] = stop_rule_latency.stop_points(workdir, runs=1, group=1, spread=0.0)
    finally:
        daemon.stop()
    run = Run.objects.get(agent_id=points.agent_id)
    run_dir = workdir / ".agents" / "runs" / run.agent_id
    rows = [json.loads(line) for line in (run_dir / "agent_metrics.jsonl").read_text().splitlines()]
    assert [row["loss"] > RULE["above"] for row in rows] == [False] * 10 + [True]
    met = Event.objects.get(agent_id=run.agent_id, kind="stopped_by_rule")
    # Start: the note the script made as it wrote its last row, the one that meets the rule:
    # after its fine rows and its pause, before the executor found the rule met.
    assert run.started_at.timestamp() + FINE_ROWS_S <= points.written
    assert points.written < met.created_at.timestamp()
    # End: the SIGTERM reaching the script, before the run was recorded stopped.
    assert points.written < points.signalled < run.finished_at.timestamp()
    assert run.status == "stopped" and run.stopped_by
    assert stop_rule_latency_ms(points) == pytest.approx((points.signalled - points.written) * 1000)
