"""Reading a run's `agent_metrics.jsonl` as it grows, and spotting loss anomalies in it.

Rows are JSON objects, one a line, W&B-style: {"_step": 10, "loss": 1.2}. The training process
appends; we poll. Nothing here raises on bad data: a run's log is written by user code.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

logger = logging.getLogger(__name__)

LOSS_KEYS = ("loss", "train/loss", "train_loss", "training_loss")
STEP_KEYS = ("_step", "step", "global_step")
STEP_LIMIT = 2**63 - 1  # PostgreSQL's bigint: the series store keeps steps in one


@dataclass
class PendingRows:
    """Rows read and not yet stored: `ends[i]` is the byte offset just past `rows[i]`, `end`
    the offset past the last whole line read (malformed lines included)."""

    rows: list[dict[str, Any]]
    ends: list[int]
    end: int
    inode: int | None


class MetricsTail:
    """Incremental reader of a JSON-lines metrics file.

    Keeps a byte offset so each `read_new()` returns only rows appended since the last call. A
    last line without its newline is still being written: it is left for the next call."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self.offset = 0
        self.skipped = 0  # malformed lines and JSON values that are not objects
        self._inode: int | None = None

    def position(self) -> tuple[int, int | None]:
        """Where the next read starts: (byte offset, inode). Saved so that a re-adopted run
        carries on from here instead of storing its metrics twice."""
        return self.offset, self._inode

    def resume_at(self, offset: int, inode: int | None) -> None:
        self.offset, self._inode = max(0, offset), inode

    def read_new(self) -> list[dict[str, Any]]:
        """The rows appended since the last call, the offset moved past them."""
        pending = self.peek()
        self.advance_to(pending.end, pending.inode)
        return pending.rows

    def peek(self) -> PendingRows:
        """The rows appended since the last advance, without moving: a caller that stores
        them advances past each batch once it is stored, so a store that fails or is cancelled
        leaves the rest for the next read."""
        offset, inode = self.offset, self._inode
        try:
            with self.path.open("rb") as handle:
                stat = os.fstat(handle.fileno())
                if stat.st_size < offset or stat.st_ino != inode:
                    # Truncated, or replaced by a new file (rotation): read it from the start.
                    offset, inode = 0, stat.st_ino
                handle.seek(offset)
                data = handle.read()
        except OSError:
            return PendingRows([], [], self.offset, self._inode)  # not created yet, or gone
        pending = PendingRows([], [], offset, inode)
        for line in data.splitlines(keepends=True):
            if not line.endswith(b"\n"):
                break  # still being written: left for the next read
            pending.end += len(line)
            if row := self._row(line):
                pending.rows.append(row)
                pending.ends.append(pending.end)
        return pending

    def advance_to(self, offset: int, inode: int | None) -> None:
        self.offset, self._inode = offset, inode

    def _row(self, line: bytes) -> dict[str, Any] | None:
        if not line.strip():
            return None
        try:
            value = json.loads(line)
        except ValueError:  # JSONDecodeError and UnicodeDecodeError both
            value = None
        if not isinstance(value, dict):
            self.skipped += 1
            logger.debug("%s: skipped a line that is not a JSON object: %.200r", self.path, line)
            return None
        return value


def loss_of(row: dict[str, Any]) -> float | None:
    """The first numeric value among the usual loss keys.

    bool is not a number here, nor is a string such as "nan"; float NaN/Infinity are (json
    reads the bare NaN and Infinity tokens that Python's json.dumps writes)."""
    for key in LOSS_KEYS:
        value = row.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    return None


def step_of(row: dict[str, Any]) -> Any:
    for key in STEP_KEYS:
        if key in row:
            return row[key]
    return None


def stored_step(row: dict[str, Any]) -> int | None:
    """The row's step as the series store keeps it (and stop rules count it): the first
    step key holding a whole number within STEP_LIMIT; None for a row without one."""
    for key in STEP_KEYS:
        value = row.get(key)
        if isinstance(value, bool):
            continue
        if isinstance(value, int) and abs(value) <= STEP_LIMIT:
            return value
        if isinstance(value, float) and value.is_integer() and abs(value) <= STEP_LIMIT:
            return int(value)
    return None


@dataclass
class AnomalyThresholds:
    high_loss: float = 8.0
    # A loss this large is no longer "high": the training has blown up (float32 overflows at
    # 3.4e38, and the next step of a float64 script often raises OverflowError).
    diverged_loss: float = 1e30
    spike_factor: float = 3.0
    window: int = 20  # earlier finite losses the spike rule averages over
    quiet_seconds: float = 180.0  # one report per signature per this many seconds
    min_points: int = 3  # earlier points needed before the spike rule applies

    def __post_init__(self) -> None:
        if self.window < 1 or self.min_points < 1:
            raise ValueError("window and min_points must be at least 1")
        if not self.spike_factor > 0:
            raise ValueError(f"spike_factor must be positive, got {self.spike_factor}")
        if not self.quiet_seconds >= 0:
            raise ValueError(f"quiet_seconds must not be negative, got {self.quiet_seconds}")


@dataclass
class Anomaly:
    severity: Literal["critical", "warning"]
    signature: str  # "nan_loss" | "inf_loss" | "diverged_loss" | "high_loss" | "loss_spike"
    message: str
    step: Any
    loss: float


@dataclass
class LossAnomalyDetector:
    """Checks batches of metric rows for NaN/Inf, high and spiking losses.

    Rules per row with a loss, at most one anomaly per row:
    - NaN or ±Inf: critical. It never enters the rolling window.
    - loss >= diverged_loss: critical "diverged_loss": the run is blowing up.
    - loss >= high_loss: warning "high_loss". A high loss that is also a spike is reported
      as high loss only: it is the more specific news, and one row should raise one alert.
    - loss >= spike_factor x mean of the earlier finite losses (the last `window` of them,
      across batches, once there are `min_points`): warning "loss_spike". Only when that
      mean is positive: a factor of a negative mean would flag nearly every value.
    A signature already reported within `quiet_seconds` (by this detector's clock) is not
    reported again."""

    thresholds: AnomalyThresholds = field(default_factory=AnomalyThresholds)
    clock: Callable[[], float] = time.monotonic

    def __post_init__(self) -> None:
        self._window: deque[float] = deque(maxlen=self.thresholds.window)
        self._last_reported: dict[str, float] = {}

    def check(self, rows: Iterable[dict[str, Any]]) -> list[Anomaly]:
        now = self.clock()
        anomalies = []
        for row in rows:
            loss = loss_of(row)
            if loss is None:
                continue
            anomaly = self._judge(loss, step_of(row))
            if math.isfinite(loss):
                self._window.append(loss)
            if anomaly is not None and self._due(anomaly.signature, now):
                anomalies.append(anomaly)
        return anomalies

    def _judge(self, loss: float, step: Any) -> Anomaly | None:
        if math.isnan(loss):
            return Anomaly("critical", "nan_loss", f"NaN loss detected (step={step}).", step, loss)
        if math.isinf(loss):
            return Anomaly("critical", "inf_loss", f"Inf loss detected (step={step}).", step, loss)
        limits = self.thresholds
        if loss >= limits.diverged_loss:
            message = f"Loss diverged (step={step}, loss={loss:.4g}): the training has blown up."
            return Anomaly("critical", "diverged_loss", message, step, loss)
        if loss >= limits.high_loss:
            message = (
                f"High loss detected (step={step}, loss={_shown(loss)}, "
                f"threshold={limits.high_loss})."
            )
            return Anomaly("warning", "high_loss", message, step, loss)
        if len(self._window) >= limits.min_points:
            average = sum(self._window) / len(self._window)
            if average > 0 and loss >= limits.spike_factor * average:
                message = (
                    f"Loss spike detected (loss={_shown(loss)}, rolling_avg={_shown(average)})."
                )
                return Anomaly("warning", "loss_spike", message, step, loss)
        return None

    def _due(self, signature: str, now: float) -> bool:
        last = self._last_reported.get(signature)
        if last is not None and now - last < self.thresholds.quiet_seconds:
            return False
        self._last_reported[signature] = now
        return True


def _shown(value: float) -> str:
    """4 decimals for a readable loss; a huge one in 4 significant digits, not 300 of them."""
    return f"{value:.4f}" if abs(value) < 1e6 else f"{value:.4g}"
