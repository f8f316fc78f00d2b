"""A run's metric sources read together, each row stored exactly once.

The executor's watchdog and the run's last read both call `collect`; one runs at a time (the
last read must not store later rows while the watchdog still waits, through a database
outage, to store earlier ones). For each source: peek, store in chunks, then advance the
source past what was stored, and save every source's position (metrics.pos) so that a
re-adopted run resumes after the stored rows. A store cut short (an error, a stop) leaves
the rest for the next read; a store already under way when a stop comes is waited for, since
its thread stores the rows either way and the source must know it did.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from agentsys.metric_sources.base import MetricSource, Row, Watched
from agentsys.metric_summary import add_row

logger = logging.getLogger(__name__)

CHUNK = 500  # rows stored per round trip
# Printed lines are the last resort: once a structured source (agent_metrics.jsonl,
# TensorBoard, ...) has stored a row, what the script prints is no longer read as metrics, so
# a script that logs with TensorBoard is charted from TensorBoard alone.
FALLBACK_SOURCES = frozenset({"stdout"})
STRUCTURED_SEEN = "_structured_seen"  # kept in metrics.pos: a re-adopted run remembers it

Store = Callable[[list[Row], str], Awaitable[Any]]


class MetricsWatch:
    def __init__(self, sources: list[MetricSource], position_file: Path, chunk: int = CHUNK):
        self.sources = sources
        self.position_file = position_file
        self.chunk = chunk
        self._lock = asyncio.Lock()
        self._summaries: dict[str, dict[str, dict]] = {source.name: {} for source in sources}
        self._structured_seen = False
        self._said_broken: set[str] = set()

    def resume(self) -> None:
        """Start each source where the run's earlier executor had stored up to."""
        saved = read_positions(self.position_file)
        self._structured_seen = saved.get(STRUCTURED_SEEN) is True
        for source in self.sources:
            position = saved.get(source.name)
            if isinstance(position, dict):
                source.resume(position)

    async def collect(
        self, store: Store, *, final: bool = False
    ) -> list[tuple[MetricSource, list[Row]]]:
        """Read every source and store what is new; returns the rows stored, per source.
        `final`: the run has ended, so sources that look for new files do so now."""
        collected = []
        async with self._lock:
            for source in self.sources:
                if final and hasattr(source, "finishing"):
                    source.finishing()
                if source.name in FALLBACK_SOURCES and self._structured_seen:
                    continue
                try:
                    # Off the event loop: it reads files (a TensorBoard event file, an MLflow
                    # store), and executors run inside runagentd.
                    rows = await asyncio.to_thread(source.peek)
                except Exception as error:  # a reader's bug must not starve the others
                    logger.exception("metrics source %s failed", source.name)
                    self._broken(source, error)
                    continue
                if not rows:
                    continue
                stored = 0
                try:
                    for start in range(0, len(rows), self.chunk):
                        part = rows[start : start + self.chunk]
                        task = asyncio.ensure_future(store(part, source.name))
                        try:
                            await asyncio.shield(task)
                        finally:
                            # A stop cancels this task, not the thread that stores: wait for
                            # it, so the source is moved past a chunk iff it was stored.
                            if not task.done():
                                await asyncio.wait([task])
                            if not task.cancelled() and task.exception() is None:
                                stored += len(part)
                finally:
                    source.advance(stored)
                    if stored and source.name not in FALLBACK_SOURCES:
                        self._structured_seen = True
                    if stored:
                        self._save_positions()
                for row in rows[:stored]:
                    add_row(self._summaries[source.name], row)
                collected.append((source, rows[:stored]))
        return collected

    def _broken(self, source: MetricSource, error: Exception) -> None:
        said = f"could not be read ({type(error).__name__}: {error}); retried each time"
        if said not in self._said_broken:
            self._said_broken.add(said)
            source.problems.append(said)

    def summary(self, whole_file: dict[str, dict]) -> dict[str, dict]:
        """The run's metrics summary, per metric: {last, min, max, first, points, last_step}
        (agentsys.metric_summary); the one place that decides which source's summary of a
        metric wins. First `whole_file`, the summary of the whole agent_metrics.jsonl (rows
        an earlier executor of a re-adopted run stored are in it, not in this watch's), then
        what this executor stored from each source in its order, printed lines last (as a
        metric's series is kept)."""
        merged: dict[str, dict] = dict(whole_file)
        ordered = sorted(self.sources, key=lambda source: source.name in FALLBACK_SOURCES)
        for source in ordered:
            for key, entry in self._summaries[source.name].items():
                merged.setdefault(key, entry)
        return merged

    def watched(self) -> list[Watched]:
        """Where the sources `collect` reads now read (agentsys.metric_sources.changes)."""
        return [
            place
            for source in self.sources
            if not (source.name in FALLBACK_SOURCES and self._structured_seen)
            for place in getattr(source, "watched", list)()
        ]

    def rescan_soon(self) -> None:
        """Files were made: a source that finds its files by an occasional walk walks now."""
        for source in self.sources:
            if hasattr(source, "rescan_soon"):
                source.rescan_soon()

    def problems(self) -> list[tuple[str, str]]:
        """New problems of every source, each once: (source name, what is wrong)."""
        said = []
        for source in self.sources:
            while source.problems:
                said.append((source.name, source.problems.pop(0)))
        return said

    def params(self) -> dict[str, Any]:
        """The hyperparameters every source found; a source whose reader fails adds none (its
        failure is said by `collect`)."""
        found: dict[str, Any] = {}
        for source in self.sources:
            try:
                found.update(source.params())
            except Exception:
                logger.debug("metrics source %s: params failed", source.name, exc_info=True)
        return found

    def _save_positions(self) -> None:
        positions: dict[str, Any] = {source.name: source.position() for source in self.sources}
        positions[STRUCTURED_SEEN] = self._structured_seen
        tmp = self.position_file.with_suffix(".tmp")
        try:
            tmp.write_text(json.dumps(positions))
            tmp.replace(self.position_file)
        except OSError:  # the run directory gone: nothing to resume then
            logger.warning("could not save metric positions in %s", self.position_file)


def read_positions(path: Path) -> dict[str, Any]:
    """The saved positions by source name. A file from before there were several sources
    holds `<offset> <inode>` of agent_metrics.jsonl."""
    try:
        text = path.read_text().strip()
    except OSError:
        return {}  # never stored anything: every source from its start
    if text.startswith("{"):
        try:
            saved = json.loads(text)
        except ValueError:
            return {}
        return saved if isinstance(saved, dict) else {}
    parts = text.split()
    try:
        return {"jsonl": {"offset": int(parts[0]), "inode": int(parts[1]) if parts[1:] else None}}
    except (ValueError, IndexError):
        return {}
