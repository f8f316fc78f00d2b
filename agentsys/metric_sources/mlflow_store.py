"""Metrics, params and tags from the MLflow file store a run logs into: the executor points a
run that has no MLFLOW_TRACKING_URI of its own at `file://<run_dir>/mlruns` (run_dir.MLFLOW_DIR),
and `mlflow.log_metric` / `log_param` / `set_tag` write there (with MLFLOW_ALLOW_FILE_STORE=true:
MLflow 3 keeps the file store in maintenance mode and refuses it otherwise; its default is now
a SQLite database, which a later reader may follow).

Why the documented file-store layout and not MLflow's library: the library's reader
(`FileStore.get_metric_history`) reads a metric's whole file on each call, so polling a run
every few seconds would cost the whole history each time (quadratic over a long run), and
importing mlflow costs the executor a second or more. The layout is simple and documented:
`mlruns/<experiment id>/<run id>/metrics/<key>` holds one line per logged value,
`<timestamp ms> <value> <step>` (older stores: no step), appended as logged; `params/<key>` and
`tags/<key>` each hold one value. A key with `/` is a sub-folder. We keep each metric file's byte
offset and read only what was appended since, up to its last newline: a half-written last line
(the script is writing it) waits for the next read. The store is never locked by MLflow; a
file we cannot open (permissions, a file the script holds and replaced) is said once and the
rest goes on. `.trash` (deleted runs) is not read.

What a row is: one logged value, `{"_step": 10, "_timestamp": 1732550000.123, "loss": 0.4}`
(the timestamp in seconds). Metric names: the first MLflow run that yields a value keeps its
bare keys; a later run's keys are prefixed with its run name (or id) and `/`, so two runs
logged by one script never collide. A name, once given, never changes: the decisions are
carried in `position()`, with each file's offset of stored rows.

params(): every run's params, then its tags that are not MLflow's own (`mlflow.*`), as
`tag.<key>`; a later run's are prefixed as its metrics are.
"""

from __future__ import annotations

import logging
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentsys.metric_sources.base import Row, Watched
from agentsys.metric_sources.tailed import TailedFiles

logger = logging.getLogger(__name__)

READ_CHUNK = 16 * 1024 * 1024  # the most of one metric file read into memory at a time
RUN_NAME_TAG = "mlflow.runName"
START_TIME = re.compile(r"^start_time: (\d+)", re.MULTILINE)  # a line of a run's meta.yaml
PARAM_VALUE_CAP = 4096  # a param longer than this is not one to show


@dataclass
class _MetricFile:
    path: Path
    rel: str  # relative to the store: the key in position()
    run: str  # "<experiment id>/<run id>"
    key: str  # the metric's name in MLflow
    read_offset: int = 0  # just past the last whole line read
    stored_offset: int = 0  # only stored rows before it
    pending: int = 0  # rows of this file read and not yet advanced past


class MlflowSource(TailedFiles):
    name = "mlflow"

    def __init__(self, store: Path):
        super().__init__()
        self.store = Path(store)
        self._prefixes: dict[str, str] = {}  # run -> metric name prefix, once decided
        self._params: dict[str, Any] = {}
        self._start_times: dict[str, int] = {}

    # -- the MetricSource protocol -------------------------------------------------------

    def peek(self) -> list[Row]:
        runs = self._scan()
        for metric_file in list(self._files.values()):
            try:
                self._read(metric_file)
            except Exception as exc:  # user files: whatever goes wrong, the rest goes on
                logger.debug("reading %s failed", metric_file.path, exc_info=True)
                self._say(f"mlflow: {metric_file.rel} could not be read ({exc}); the rest goes on")
        for run, run_dir in runs:
            self._read_params(run, run_dir)
        return [row for row, _, _ in self._pending]

    def position(self) -> dict[str, Any]:
        files = {key: self._saved_offset(f) for key, f in self._files.items()}
        return {"files": files, "prefixes": dict(self._prefixes)}

    def resume(self, position: dict[str, Any]) -> None:
        try:
            self._prefixes.update({str(k): str(v) for k, v in position["prefixes"].items()})
            for rel, offset in position["files"].items():
                metric_file = self._track(self.store / rel)
                metric_file.read_offset = metric_file.stored_offset = max(0, int(offset))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            self._say(f"mlflow: the saved position could not be used ({exc!r})")

    def params(self) -> dict[str, Any]:
        return dict(self._params)

    def watched(self) -> list[Watched]:
        return [Watched(self.store, recursive=True)]

    # -- finding runs and metric files ----------------------------------------------------

    def _scan(self) -> list[tuple[str, Path]]:
        """The runs in the store (as "<experiment>/<run>", their folder), tracking every
        metric file found. A store not made yet (the script has not logged) is no run."""
        runs = []
        for experiment in _folders(self.store):
            if experiment.name.startswith("."):  # .trash: deleted runs
                continue
            for run_dir in _folders(experiment):
                if (run_dir / "metrics").is_dir():  # not an experiment's models/ or tags/
                    runs.append((f"{experiment.name}/{run_dir.name}", run_dir))
        # Runs in the order they started (a run id is random): the first keeps bare names.
        runs.sort(key=lambda run: (self._start_time(*run), run[0]))
        for _run, run_dir in runs:
            metrics = run_dir / "metrics"
            for folder, _dirs, names in os.walk(metrics, onerror=lambda _error: None):
                for name in sorted(names):
                    path = Path(folder) / name
                    if path.relative_to(self.store).as_posix() not in self._files:
                        self._track(path)
        return runs

    def _start_time(self, run: str, run_dir: Path) -> int:
        """The run's start_time (ms) from its meta.yaml; a run without one sorts last."""
        if run not in self._start_times:
            try:
                found = START_TIME.search((run_dir / "meta.yaml").read_text())
            except OSError:
                found = None
            if found is None:
                return 2**63  # not written yet: looked at again next time
            self._start_times[run] = int(found.group(1))
        return self._start_times[run]

    def _track(self, path: Path) -> _MetricFile:
        rel = path.relative_to(self.store).as_posix()
        if rel not in self._files:
            experiment, run, _metrics, *key = rel.split("/")
            self._files[rel] = _MetricFile(path, rel, f"{experiment}/{run}", "/".join(key))
        return self._files[rel]

    # -- reading ----------------------------------------------------------------------------

    def _read(self, metric_file: _MetricFile) -> None:
        try:
            size = metric_file.path.stat().st_size
        except FileNotFoundError:
            self._say(f"mlflow: {metric_file.rel} deleted, no longer read")
            return
        if size < metric_file.read_offset:
            self._say(
                f"mlflow: {metric_file.rel} shrank to {size} bytes after "
                f"{metric_file.read_offset} were read (rewritten?); read on only past them"
            )
        if size <= metric_file.read_offset:
            return  # nothing new: the common case costs one stat
        if not metric_file.pending:
            metric_file.stored_offset = metric_file.read_offset
        try:
            with metric_file.path.open("rb") as handle:
                handle.seek(metric_file.read_offset)
                data = handle.read(min(size - metric_file.read_offset, READ_CHUNK))
        except OSError as exc:
            self._say(f"mlflow: {metric_file.rel} unreadable ({exc.strerror or exc})")
            return
        end = data.rfind(b"\n")
        if end < 0:
            return  # only a half-written line: it waits for the next read
        prefix = self._prefix(metric_file.run)
        name = prefix + metric_file.key
        offset = metric_file.read_offset
        for line in data[: end + 1].splitlines(keepends=True):
            offset += len(line)
            row = self._row(metric_file, line, name, offset - len(line))
            if row is not None:
                self._pending.append((row, metric_file.rel, offset))
                metric_file.pending += 1
        metric_file.read_offset = offset

    def _row(self, metric_file: _MetricFile, line: bytes, name: str, start: int) -> Row | None:
        parts = line.split()
        if not parts:
            return None
        try:
            if len(parts) not in (2, 3):
                raise ValueError(f"{len(parts)} fields")
            timestamp = int(parts[0]) / 1000.0
            value = float(parts[1])
            step = int(parts[2]) if len(parts) == 3 else None
        except ValueError:
            self._say(
                f"mlflow: {metric_file.rel} has a line that is not `timestamp value step` at "
                f"byte {start}, skipped"
            )
            return None
        row: Row = {"_timestamp": timestamp, name: value}  # NaN too: the watchdog alerts on it
        if step is not None:
            row["_step"] = step
        return row

    def _read_params(self, run: str, run_dir: Path) -> None:
        prefix = None
        for kind, label in (("params", ""), ("tags", "tag.")):
            folder = run_dir / kind
            for dirpath, _dirs, names in os.walk(folder, onerror=lambda _error: None):
                for name in names:
                    path = Path(dirpath) / name
                    key = path.relative_to(folder).as_posix()
                    if kind == "tags" and key.startswith("mlflow."):
                        continue
                    try:
                        text = path.read_text(errors="replace")[:PARAM_VALUE_CAP]
                    except OSError:
                        continue  # being written or gone: next read
                    prefix = self._prefix(run) if prefix is None else prefix
                    self._params[prefix + label + key] = _param_value(text)

    def _prefix(self, run: str) -> str:
        if run not in self._prefixes:
            first = not self._prefixes
            self._prefixes[run] = "" if first else self._run_name(run) + "/"
        return self._prefixes[run]

    def _run_name(self, run: str) -> str:
        try:
            return (self.store / run / "tags" / RUN_NAME_TAG).read_text().strip() or run
        except OSError:
            return run.split("/")[1]


def _folders(path: Path) -> list[Path]:
    try:
        return sorted(entry for entry in path.iterdir() if entry.is_dir())
    except OSError:
        return []


def _param_value(text: str) -> Any:
    """MLflow keeps every param as a string: numbers are shown as numbers."""
    try:
        number = float(text)
    except ValueError:
        return text
    if not math.isfinite(number):
        return text
    return int(number) if number.is_integer() and "." not in text and "e" not in text else number
