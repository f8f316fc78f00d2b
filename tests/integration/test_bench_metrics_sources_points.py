"""bench/metrics_sources.py's and bench/metrics_tailing.py's figures time what their names say
(issue 40 §3), at a tiny size with each source's real writer and reader:

- <source>_points_per_s is the reading cost (issue 20): each read runs from after its fresh
  source was made and its writer was done, to just before the source's peek(), to advance()'s
  return with nothing else called in it (no storing: no position saved, no MetricsWatch), and
  divides the values in the rows that peek returned, all of them; the best read is reported;
- <source>_tailing_cpu_percent_at_1000_pts_s is this process's CPU over the window from
  before the writer's first point (after its start-up) to the last read, made after its last
  point, with every read inside it; <source>_tailing_points_read is every point written."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from tensorboardX import SummaryWriter

from agentsys.metric_sources import metric_sources_for
from agentsys.metric_sources.mlflow_store import MlflowSource
from agentsys.metric_sources.stdout import StdoutSource
from agentsys.metric_sources.tensorboard import TensorBoardSource
from agentsys.metric_sources.wandb_offline import WandbSource
from agentsys.metric_sources.watch import MetricsWatch
from agentsys.run_dir import METRICS_POSITION_FILE, run_dir_of
from bench import metrics_sources, metrics_tailing
from bench.metrics_sources import best_points_per_s, points_per_s
from bench.metrics_tailing import READY, cpu_percent
from tests.call_watch import watch_calls

pytestmark = pytest.mark.slow
# points/s: a pace the slowest writer (wandb's log calls) keeps on a loaded machine; at 200 it
# wrote 180/s once beside the whole suite, under the bench's 90 % floor (SystemExit).
RATE = 100
# 0.8 s of writing at 50 steps/s. TensorBoard's file stays under its writer's 4 KiB buffer
# until it closes: a read that finds that buffer flushed with a record cut inside its CRC
# takes the record for corrupt and skips it (agentsys/metric_sources/tensorboard.py), and at
# 60 steps every run has its file at 4,096 bytes, cut in a record's data CRC, for ~0.5 s.
STEPS = 40
LOOK = 0.15  # s between the watchdog's reads while it writes: several of them

# source: (its bench at a tiny size, its reader, what its writer is: (owner, name) watched)
READS = {
    "tensorboard": (
        lambda: metrics_sources.tensorboard_reads(points=2_000, tries=2),
        TensorBoardSource,
        (SummaryWriter, "close"),
    ),
    "stdout": (
        lambda: metrics_sources.stdout_reads(lines=1_000, tries=2),
        StdoutSource,
        (metrics_sources.subprocess, "run"),
    ),
    "mlflow": (
        lambda: metrics_sources.mlflow_reads(points=2_000, tries=2),
        MlflowSource,
        (metrics_sources.subprocess, "run"),
    ),
    "wandb": (
        lambda: metrics_sources.wandb_reads(points=1_200, tries=2),
        WandbSource,
        (metrics_sources.subprocess, "run"),
    ),
}
POINTS = {"tensorboard": 2_000, "stdout": 2_000, "mlflow": 2_000, "wandb": 1_200}
# What else a source is asked for: storing its rows (MetricsWatch.collect) saves positions.
OTHER_CALLS = ("position", "resume", "params", "watched")


@pytest.mark.parametrize("source", READS)
def test_points_per_s_runs_from_just_before_peek_to_advance_returned(source, monkeypatch):
    bench, reader, (writer_owner, writer_name) = READS[source]
    writers = watch_calls(monkeypatch, writer_owner, writer_name)
    made = watch_calls(monkeypatch, reader, "__init__")
    peeks = watch_calls(monkeypatch, reader, "peek")
    advances = watch_calls(monkeypatch, reader, "advance")
    others = [watch_calls(monkeypatch, reader, name) for name in OTHER_CALLS]
    others.append(watch_calls(monkeypatch, MetricsWatch, "collect"))
    reads = bench()
    assert len(reads) == len(made) == len(peeks) == len(advances) == 2
    [written] = writers  # the files written once, read whole by each fresh source
    watched = sorted(
        [*peeks, *advances, *(call for calls in others for call in calls)],
        key=lambda call: call.began,
    )
    for read, init, peek, advance in zip(reads, made, peeks, advances, strict=True):
        # Start: the files finished and this read's source made, then just before its peek.
        assert written.returned <= init.returned <= read.began <= peek.began
        # End: advance past every row peeked has returned; nothing else was called in it.
        assert peek.returned <= advance.began <= advance.returned <= read.ended
        assert [c for c in watched if read.began <= c.began <= read.ended] == [peek, advance]
        # The points it divides: every value in the rows its peek returned (a fresh source's
        # peek returns the whole file).
        keys = {key for row in peek.result for key in row if not key.startswith("_")}
        values = sum(1 for row in peek.result for key in row if key in ("loss", "lr"))
        assert keys == {"loss", "lr"}
        assert read.points == values == POINTS[source]
        # Besides them, the span holds the bench's own few statements: microseconds (a pause
        # of the garbage collector at most), not a step of its own.
        outside = (peek.began - read.began) + (read.ended - advance.returned)
        assert outside <= 0.05 + 0.1 * (advance.returned - peek.began)
        assert points_per_s(read) == values / (read.ended - read.began)
    assert best_points_per_s(reads) == max(points_per_s(read) for read in reads)


def _points_in(run_dir) -> dict[str, int]:
    """What the run's files hold, read afresh once the run is over."""
    counter = metrics_tailing.Counter()
    watch = MetricsWatch(metric_sources_for(run_dir, {}), run_dir / f"{METRICS_POSITION_FILE}.2")
    asyncio.run(watch.collect(counter, final=True))
    return counter.points


@pytest.mark.parametrize("source", ["jsonl", "tensorboard", "stdout", "mlflow", "wandb"])
def test_tailing_runs_from_the_writers_first_point_to_the_last_read(source, tmp_path, monkeypatch):
    collects = []
    real_collect = MetricsWatch.collect

    async def collect(self, store, *, final=False):
        began = time.time()
        result = await real_collect(self, store, final=final)
        collects.append((began, time.time(), final))
        return result

    monkeypatch.setattr(MetricsWatch, "collect", collect)
    monkeypatch.setattr(metrics_tailing, "RATE", RATE)
    clocks = watch_calls(monkeypatch, metrics_tailing, "_cpu_seconds")
    tailing = asyncio.run(metrics_tailing.tail_while_writing(source, tmp_path, STEPS, LOOK))
    note = json.loads((tmp_path / READY).read_text())
    start_clock, end_clock = clocks
    # Start: the writer up (its start-up done), both clocks started before its first point.
    assert note["up"] <= start_clock.began <= start_clock.returned <= tailing.started
    assert tailing.started <= note["first"]
    # Every read inside the window, some while it wrote, the last (final) after its last point.
    *looks, (last_began, last_returned, final) = collects
    assert final and not any(look_final for _, _, look_final in looks)
    assert any(began < note["last"] for began, _, _ in looks)
    assert all(tailing.started <= began for began, _, _ in collects)
    assert note["last"] <= last_began
    # End: both clocks read once the last read had returned.
    assert last_returned <= end_clock.began <= end_clock.returned <= tailing.ended
    assert tailing.cpu_s == end_clock.result - start_clock.result
    assert cpu_percent(tailing) == pytest.approx(
        100 * tailing.cpu_s / (tailing.ended - tailing.started)
    )
    # The points read: every one the writer wrote, as its files hold them.
    run_dir = run_dir_of(tmp_path, f"bench-{source}")
    assert tailing.points == 2 * STEPS == _points_in(run_dir)[source]
