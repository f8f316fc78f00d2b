"""What an executor does at each look at its run (every `monitor_interval` seconds while it
goes, and once when it has ended): store the new metric rows of every source, say once what a
source could not read, alert on NaN/inf and spiking losses, and put what the script's trackers
know of the run (their params, an online run's link) onto it."""

from __future__ import annotations

import asyncio
import logging
import math
from pathlib import Path

from agentsys.metric_sources import metric_sources_for
from agentsys.metric_sources.watch import MetricsWatch
from agentsys.metrics import AnomalyThresholds, LossAnomalyDetector
from agentsys.run_dir import LOG_FILE, METRICS_POSITION_FILE
from agentsys.tracker_links import tracker_urls_in_log

logger = logging.getLogger("agentsys.executor")

METRICS_CHUNK = 500  # metrics rows written per round trip


class RunWatchdog:
    def __init__(self, agent, run_dir: Path, config: dict, thresholds: AnomalyThresholds):
        self.agent = agent  # the ExecutorAgent: its store, events and alerts
        self.run_dir = run_dir
        self.metrics = MetricsWatch(
            metric_sources_for(run_dir, config),
            run_dir / METRICS_POSITION_FILE,
            chunk=METRICS_CHUNK,
        )
        if config.get("resume"):
            self.metrics.resume()
        # One detector per source: a loss printed and also logged to TensorBoard would look
        # like a spike each time the second source's older steps arrive.
        self.thresholds = thresholds
        self.detectors: dict[str, LossAnomalyDetector] = {}
        self.tracking: tuple[dict, dict] = ({}, {})  # logged params, tracker urls: as stored

    async def look(self, *, final: bool = False) -> None:
        agent = self.agent
        collected = await self.metrics.collect(agent.record_metrics, final=final)
        for source, problem in self.metrics.problems():
            logger.warning("%s: metrics from %s: %s", agent.id, source, problem)
            agent.emit_event("metrics_problem", {"source": source, "problem": problem})
        for source, rows in collected:
            agent.emit_event(
                "metrics", {"rows": len(rows), "last": rows[-1], "source": source.name}
            )
            detector = self.detectors.setdefault(source.name, LossAnomalyDetector(self.thresholds))
            for anomaly in detector.check(rows):
                await agent.alert(
                    anomaly.severity,
                    anomaly.message,
                    anomaly.signature,
                    {"step": anomaly.step, "loss": jsonable_number(anomaly.loss)},
                    run_dir=str(self.run_dir),
                )
        await self._record_tracking()

    async def _record_tracking(self) -> None:
        """Onto the run: the params its trackers logged and the online tracker runs it
        printed, when they change. A failed write is tried again at the next look."""
        urls = await asyncio.to_thread(tracker_urls_in_log, self.run_dir / LOG_FILE)
        found = (self.metrics.params(), urls)
        runs = self.agent.runs
        if found == self.tracking or runs is None:
            return
        params = {str(k): jsonable_number(v) for k, v in found[0].items()}
        try:
            await asyncio.to_thread(runs.write_run_tracking, params=params, urls=urls)
        except Exception:
            logger.exception("%s: could not record the run's tracker params", self.agent.id)
            return
        self.tracking = found


def jsonable_number(value):
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # JSON has no NaN/Inf
    return value
