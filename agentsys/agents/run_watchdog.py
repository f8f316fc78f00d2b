"""What an executor does at each look at its run (every `monitor_interval` seconds while it
goes, and once when it has ended): store the new metric rows of every source, check them
against the run's stop rules (agentsys.stop_rules) and its sweep's early stopping
(agentsys.asha: each rung reached is judged against the sweep's other runs, through the run
port, which keeps the sweep's record), say once what a source could not read,
alert on NaN/inf and spiking losses, and put what the script's trackers know of the run
(their params, an online run's link) onto it.

Stop rules are checked here, on the host that runs the run, so they hold for every metric
source, host and backend (a SLURM run's files are read the same way). A rule met asks the
executor to stop (`ExecutorAgent.stop_itself`) once it is recorded on the run (`stopped_by`);
the rows that met it are stored first."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from pathlib import Path

from agentsys import asha
from agentsys.metric_sources import metric_sources_for
from agentsys.metric_sources.watch import MetricsWatch
from agentsys.metrics import AnomalyThresholds, LossAnomalyDetector
from agentsys.run_dir import LOG_FILE, METRICS_POSITION_FILE, PID_FILE
from agentsys.stop_rules import Hit, StopRules, parse
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
        # Checked by the API; a rule that still cannot be read fails the run at its start.
        self.stop_rules = StopRules(
            parse(config.get("stop_when")), started_at=_started_at(run_dir, config)
        )
        self.rungs = _rung_watch(config.get("early_stop"))
        self.stopped_by = ""  # the rule met, in words, once one is

    async def look(self, *, final: bool = False) -> None:
        agent = self.agent
        collected = await self.metrics.collect(agent.record_metrics, final=final)
        for source, problem in self.metrics.problems():
            logger.warning("%s: metrics from %s: %s", agent.id, source, problem)
            agent.emit_event("metrics_problem", {"source": source, "problem": problem})
        if not final:  # the run has ended: nothing left to stop
            await self._check_stop_rules(collected)
        elif self.rungs is not None:  # but its values count at the rungs it reached
            for _source, rows in collected:
                await self._judge_rungs(rows, ended=True)
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

    async def _check_stop_rules(self, collected) -> None:
        rules = self.stop_rules
        if not (rules or self.rungs) or self.stopped_by:
            return
        hit = None
        for _source, rows in collected:
            hit = rules.feed_all(rows) if rules else None
            if hit is None and self.rungs is not None:
                hit = await self._judge_rungs(rows)
            if hit is not None:
                break
        hit = hit or rules.check_time(time.time())
        if hit is not None:
            await self._stop_by(hit)

    async def _judge_rungs(self, rows: list[dict], *, ended: bool = False) -> Hit | None:
        """Each rung these rows reach, judged in turn; the first that stops the run."""
        watch = self.rungs
        for reached in watch.feed_all(rows):
            try:
                answer = await self.agent.in_runs(
                    "judge_at_rung",
                    rung=reached.rung,
                    value=reached.value,
                    step=reached.step,
                    ended=ended,
                )
            except Exception:  # the database: judged again at the next row past the rung
                logger.exception("%s: could not judge rung %s", self.agent.id, reached.rung)
                watch.forget(reached)
                return None
            if answer is not None and not answer[0] and not ended:
                return Hit(watch.spec, answer[1])
        return None

    async def _stop_by(self, hit: Hit) -> None:
        agent = self.agent
        self.stopped_by = hit.words
        logger.info("%s: stopped by its rule: %s", agent.id, hit.words)
        agent.emit_event("stopped_by_rule", {"rule": hit.rule, "stopped_by": hit.words})
        try:  # before the stop: the run is never seen `stopped` without its reason
            await agent.in_runs("write_stopped_by", words=hit.words)
        except Exception:  # the stop matters more than its record
            logger.exception("%s: could not record stopped_by", agent.id)
        agent.stop_itself()

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


def _rung_watch(spec) -> asha.RungWatch | None:
    try:
        parsed = asha.parse(spec)
    except ValueError:  # checked by the API when the sweep was made
        logger.warning("early_stop not read: %r", spec)
        return None
    return asha.RungWatch(parsed) if parsed else None


def _started_at(run_dir: Path, config: dict) -> float:
    """When the run started, for a wall_seconds rule: now, for a run this executor starts;
    its job.pid's time, for one a restarted runagentd re-adopts."""
    if config.get("resume"):
        try:
            return (run_dir / PID_FILE).stat().st_mtime
        except OSError:
            pass
    return time.time()


def jsonable_number(value):
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # JSON has no NaN/Inf
    return value
