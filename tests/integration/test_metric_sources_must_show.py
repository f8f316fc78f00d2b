"""Issue 20's first must-show, for every source (agent_metrics.jsonl, TensorBoard, MLflow, W&B,
printed lines): a real script run through the queue gets its series from that source, named
by /api/runs/{id}/metrics, a NaN alert raised from that source's row, and the research loop's
results text (the executor's RESULT entry read by experiments._metrics, rendered by
format_results, as the loop shows the model) naming the metric with its values.

The five runs go through one daemon at once (each in a workdir of its own), so the module
costs about one W&B run rather than five runs in a row."""

import asyncio

import pytest

from agentsys.research.experiments import _alerts, _metrics
from agentsys.research.results import ExperimentResult, format_results
from agentsys.run_dir import run_dir_of
from runtime_app.memory_view import DjangoMemoryView
from scheduler_app.models import Alert, MetricSeries, RunStatus
from tests.helpers import launch_run, run_ended
from tests.metric_source_scripts import SOURCES, command, run_env, write_scripts
from tests.runtime_harness import DaemonProcess

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
METRICS_LINE = (
    "- metrics: acc last=1 min=0.1 max=1 points=11 last_step=11; "
    "loss last=NaN min=0.1 max=1 points=11 last_step=11"
)


class _Loop:
    """The research loop's side of _metrics/_alerts: an agent whose memory is the real store."""

    id = "research-mustshow"

    def __init__(self):
        self.memory = DjangoMemoryView(self.id, "research", {"project": "p"})

    async def in_memory(self, method, /, **kwargs):
        return await asyncio.to_thread(getattr(self.memory, method), **kwargs)


async def _results_text(run, workdir) -> str:
    loop = _Loop()
    result = ExperimentResult(goal="must show", run_id=run.agent_id, command=run.command)
    result.metrics = await _metrics(loop, run.agent_id, run_dir_of(workdir, run.agent_id))
    result.alerts = await _alerts(loop, run.agent_id)
    return format_results([result])


@pytest.fixture
def runs(tmp_path):
    """One finished run per source: {source: (run, its workdir)}."""
    daemon = DaemonProcess("mustshow-host", AGENTSYS_GPUS="")
    try:
        launched = {}
        for source in SOURCES:
            workdir = tmp_path / source
            workdir.mkdir()
            write_scripts(workdir)
            run = launch_run(workdir, command(source), executor_options=run_env(source))
            launched[source] = (run, workdir)
        finished = {}
        for source, (run, workdir) in launched.items():
            run = run_ended(run, timeout=120)
            assert run.status == RunStatus.DONE, (source, run.error)
            finished[source] = (run, workdir)
        yield finished
    finally:
        if daemon.process.poll() is None:
            daemon.stop()


def test_every_source_is_charted_alerted_and_read_by_the_loop(runs, api):
    for source, (run, workdir) in runs.items():
        # Its series, from its source alone: 10 finite points and the NaN.
        series = {s.key: s for s in MetricSeries.objects.filter(run=run)}
        assert {k: (s.source, s.points, s.non_finite) for k, s in series.items()} == {
            "loss": (source, 11, 1),
            "acc": (source, 11, 0),
        }, source
        # What the API says: the source named on each series.
        body = api("get", f"/api/runs/{run.pk}/metrics").json()
        by_key = {s["key"]: s for s in body["series"]}
        assert (by_key["loss"]["source"], by_key["loss"]["last_value"]) == (source, "NaN"), source
        assert (by_key["acc"]["source"], by_key["acc"]["last_value"]) == (source, 1.0), source
        # The NaN alert, at the step the source gave the NaN row.
        [alert] = Alert.objects.filter(run=run)
        assert (alert.severity, alert.message) == ("critical", "NaN loss detected (step=11)."), (
            source
        )
        # The loop's results text: each metric named with its values (the NaN as the memory
        # store keeps it, "NaN"), nothing else (no _timestamp), and the alert.
        text = asyncio.run(_results_text(run, workdir))
        assert METRICS_LINE in text.splitlines(), (source, text)
        assert "- alerts: NaN loss detected (step=11)." in text.splitlines(), (source, text)
