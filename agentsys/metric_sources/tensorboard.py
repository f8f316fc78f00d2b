"""Metrics from the TensorBoard event files (`events.out.tfevents.*`) a run writes anywhere
under its working directory: Lightning's lightning_logs/, HF Trainer's runs/, a --logdir.

Records are read with the tensorboard package's own record reader (its TFRecord reader with
the CRC checks, `PyRecordReader_New`) and parsed as its `Event` protos: no record parser of
ours. We hand the reader the bytes appended since the last read (its own file object cannot
start at an offset), and keep each file's byte offset: past a whole record it is the record's
length plus the 16 bytes of framing around it. position() carries these offsets. A read takes
at most `read_chunk` (64 MiB) of a file into memory; the rest comes at the next read.

What a row is: the scalars one event file logged at one step, merged
({"_step": 10, "_timestamp": 1732550000.1, "loss": 0.4, "lr": 0.05}), from v1 `simple_value`
summaries and v2 tensor summaries of the scalars plugin (torch's SummaryWriter, tensorboardX,
Lightning, TF2). Consecutive records of the same step make one row; a step split across two
reads gives two rows with the same `_step` (each metric is stored once either way).

Tag names: the first event directory that yields a scalar keeps its bare tags, so the usual
`loss` stays `loss` for the charts and the NaN watchdog; the tags of every later directory are
prefixed with that directory relative to root ("lightning_logs/version_1/loss"), so two
versions (or a tensorboardX hparams sub-run) never collide. A name, once given, never changes:
the decisions are carried in `position()`.

hparams (the hparams plugin's session_start_info) go to `params()`.

Finding files: a walk of root (skipping AgentSys's `.agents/` and folders that never hold a
run's logs: .git, .venv, node_modules, __pycache__) at most every `rescan_seconds` (5 s) and of
at most `max_entries` directory entries (50,000), so a huge working directory costs a bounded
walk now and then, not one per read. A file already known is polled with one stat per read.

Bad input never raises. A record whose CRC fails is skipped: the reader then looks for the
next record whose header and data CRCs both check, byte by byte (a false match is a 2^-64
chance), said once as "a corrupt record at byte N". A last record cut short is being written
(a writer flushes mid-record): it is read once whole; only if it stays cut short for
`truncated_seconds` (30 s), or at the run's last read, is that said, once (not after a corrupt
stretch that runs to the end: that is said already). A file deleted or unreadable is said once.
"""

from __future__ import annotations

import functools
import io
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from agentsys.metric_sources.base import Row, Watched
from agentsys.metric_sources.tailed import TailedFiles


@functools.cache
def _tb() -> SimpleNamespace:
    """The tensorboard package's record reader and protos, imported on first use: they bring
    numpy and TensorFlow's stub (~0.2 s), which every process importing the metric sources
    (the web, runagentd, its workers, each manage.py command) paid at start, though only a
    run that writes event files needs them."""
    from google.protobuf.message import DecodeError
    from tensorboard.compat.proto import event_pb2
    from tensorboard.compat.tensorflow_stub import errors
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import PyRecordReader_New
    from tensorboard.plugins.hparams import plugin_data_pb2
    from tensorboard.util import tensor_util

    return SimpleNamespace(
        DecodeError=DecodeError,
        event_pb2=event_pb2,
        errors=errors,
        record_reader=PyRecordReader_New,
        plugin_data_pb2=plugin_data_pb2,
        tensor_util=tensor_util,
    )


logger = logging.getLogger(__name__)

EVENT_FILE_MARK = "events.out.tfevents."
SKIPPED_DIRS = frozenset({".agents", ".git", ".venv", "node_modules", "__pycache__"})
SCALARS_PLUGIN = "scalars"
HPARAMS_PLUGIN = "hparams"
RECORD_FRAMING = 16  # bytes around each record's data: length, its CRC, the data's CRC
READ_CHUNK = 64 * 1024 * 1024  # the most of one file read into memory at a time


@dataclass
class _EventFile:
    path: Path
    rel: str  # relative to root: the key in position()
    folder: str  # its directory relative to root ("." for root itself)
    read_offset: int = 0  # where the next read starts: just past the last whole record read
    stored_offset: int = 0  # where a resumed reader starts: only stored rows before it
    scalar_tags: set[str] = field(default_factory=set)  # v2 tags whose metadata said scalars
    scanning: bool = False  # read_offset is inside a corrupt stretch: look for the next record
    stuck_since: float | None = None  # when a cut-short last record was first seen
    cut_size: int = -1  # the file size then: growth means the writer is still going
    chunk_size: int = READ_CHUNK  # doubled for a record bigger than it (a huge image)
    pending: int = 0  # rows of this file read and not yet advanced past


class TensorBoardSource(TailedFiles):
    name = "tensorboard"

    def __init__(
        self,
        root: Path,
        *,
        rescan_seconds: float = 5.0,
        max_entries: int = 50_000,
        truncated_seconds: float = 30.0,
        read_chunk: int = READ_CHUNK,
        clock: Callable[[], float] = time.monotonic,
        owns: Callable[[Path], bool] | None = None,
    ):
        super().__init__()
        self.root = Path(root)
        # Which event files are this source's (agentsys.metric_sources.ownership): runs that
        # share a workdir must not read each other's. None: every file under root.
        self.owns = owns
        self.rescan_seconds = rescan_seconds
        self.max_entries = max_entries
        self.truncated_seconds = truncated_seconds
        self.read_chunk = read_chunk
        self._clock = clock
        self._prefixes: dict[str, str] = {}  # event directory -> tag prefix, once decided
        self._params: dict[str, Any] = {}
        self._last_scan: float | None = None
        self._ended = False  # the run has ended: a cut-short record stays so

    # -- the MetricSource protocol -------------------------------------------------------

    def peek(self) -> list[Row]:
        self._scan()
        for event_file in list(self._files.values()):
            try:
                self._read(event_file)
            except Exception as exc:  # user files: whatever the reader trips on, go on
                logger.debug("reading %s failed", event_file.path, exc_info=True)
                self._say(f"{event_file.rel}: could not be read ({exc}); the rest goes on")
        return [row for row, _, _ in self._pending]

    def position(self) -> dict[str, Any]:
        files = {}
        for key, event_file in self._files.items():
            offset = self._saved_offset(event_file)
            files[key] = {"offset": offset, "scalar_tags": sorted(event_file.scalar_tags)}
        return {"files": files, "prefixes": dict(self._prefixes), "params": dict(self._params)}

    def resume(self, position: dict[str, Any]) -> None:
        try:
            self._prefixes.update({str(k): str(v) for k, v in position["prefixes"].items()})
            self._params.update(position["params"])
            for key, saved in position["files"].items():
                event_file = self._track(self.root / key)
                offset = max(0, int(saved["offset"]))
                event_file.read_offset = event_file.stored_offset = offset
                event_file.scalar_tags = {str(tag) for tag in saved["scalar_tags"]}
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            self._say(f"tensorboard: the saved position could not be used ({exc!r})")

    def finishing(self) -> None:
        """The run has ended: the next peek looks for event files at once, whatever the rescan
        interval (a run shorter than it would otherwise lose its only file), and a last record
        still cut short is said at once (no writer is left to complete it)."""
        self._last_scan = None
        self._ended = True

    def params(self) -> dict[str, Any]:
        return dict(self._params)

    def watched(self) -> list[Watched]:
        return [Watched(self.root, recursive=True, skip=SKIPPED_DIRS)]

    def rescan_soon(self) -> None:
        """A file was made under root: the next peek walks it at once, not when the rescan
        interval is up, so a new event file's first rows are read on the change that made it."""
        self._last_scan = None

    # -- finding event files --------------------------------------------------------------

    def _scan(self) -> None:
        now = self._clock()
        if self._last_scan is not None and now - self._last_scan < self.rescan_seconds:
            return
        self._last_scan = now
        entries = 0
        for folder, dirs, names in os.walk(self.root, onerror=lambda _error: None):
            dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
            entries += len(dirs) + len(names)
            for name in sorted(names):
                if EVENT_FILE_MARK in name:
                    path = Path(folder) / name
                    rel = path.relative_to(self.root).as_posix()
                    if rel in self._files or self.owns is None or self.owns(path):
                        self._track(path)
            if entries > self.max_entries:
                self._say(
                    f"tensorboard: the working directory has more than {self.max_entries} "
                    "entries; event files past them are not looked for"
                )
                break

    def _track(self, path: Path) -> _EventFile:
        rel = path.relative_to(self.root).as_posix()
        if rel not in self._files:
            folder = path.parent.relative_to(self.root).as_posix()
            self._files[rel] = _EventFile(path, rel, folder, chunk_size=self.read_chunk)
        return self._files[rel]

    # -- reading one file -----------------------------------------------------------------

    def _read(self, event_file: _EventFile) -> None:
        try:
            size = event_file.path.stat().st_size
        except FileNotFoundError:
            self._say(f"{event_file.rel}: deleted, no longer read")
            return
        except OSError as exc:
            self._say(f"{event_file.rel}: unreadable ({exc.strerror or exc})")
            return
        if size < event_file.read_offset:
            self._say(
                f"{event_file.rel}: shrank to {size} bytes after {event_file.read_offset} were "
                "read (rewritten?); read on only past them"
            )
        if size <= event_file.read_offset:
            return  # nothing new: the common case costs one stat
        if not event_file.pending:
            event_file.stored_offset = event_file.read_offset  # all before it stored or no row
        try:
            handle = event_file.path.open("rb")
        except FileNotFoundError:
            self._say(f"{event_file.rel}: deleted, no longer read")
            return
        except OSError as exc:
            self._say(f"{event_file.rel}: unreadable ({exc.strerror or exc})")
            return
        with handle:
            self._read_records(event_file, handle, size)

    def _read_records(self, event_file: _EventFile, handle, size: int) -> None:
        rows: list[tuple[Row, int]] = []  # this read's rows and the offset past each
        base = event_file.read_offset
        handle.seek(base)
        # What is new, in memory (at most chunk_size a read: the rest comes next time).
        capped = size - base > event_file.chunk_size
        chunk = io.BytesIO(handle.read(min(size - base, event_file.chunk_size)))
        try:
            self._read_into(event_file, chunk, base, size, rows, capped)
        finally:  # rows before whatever went wrong are kept: read_offset is past them
            self._pending.extend((row, event_file.rel, end) for row, end in rows)
            event_file.pending += len(rows)
        if capped and event_file.read_offset == base:
            event_file.chunk_size *= 2  # one record larger than a chunk: take more next time

    def _read_into(
        self,
        event_file: _EventFile,
        chunk: io.BytesIO,
        base: int,
        size: int,
        rows: list,
        capped: bool,
    ) -> None:
        reader = self._reader_at(event_file, chunk, 0)
        while True:
            start = event_file.read_offset
            try:
                reader.GetNext()
            except _tb().errors.OutOfRangeError:
                event_file.stuck_since = None
                break  # the end of what is written
            except _tb().errors.DataLossError as exc:
                # A record still being written is "truncated record in <part>", and the part
                # may be a CRC ("header crc"): only a failed check is damage.
                if "truncated record" in str(exc):
                    if not capped:  # (or only cut by our chunk: the rest is read next time)
                        self._cut_short(event_file, start, size)
                    break
                if not event_file.scanning:
                    self._say(f"{event_file.rel}: a corrupt record at byte {start}, skipped")
                    event_file.scanning = True
                event_file.read_offset = start + 1
                reader = self._reader_at(event_file, chunk, start + 1 - base)
                continue
            event_file.scanning = False
            event_file.stuck_since = None
            record = reader.record()
            # A record is its 8-byte length, the length's CRC, the data, the data's CRC.
            event_file.read_offset = start + len(record) + RECORD_FRAMING
            self._take(event_file, record, start, rows)

    def _reader_at(self, event_file: _EventFile, chunk: io.BytesIO, offset: int):
        # The reader's own file object reopens the file for every chunk and cannot start at an
        # offset; it only ever calls read(n) on it, so it reads the bytes we read, from where
        # we want.
        reader = _tb().record_reader(str(event_file.path))
        chunk.seek(offset)
        reader.file_handle = chunk
        return reader

    def _cut_short(self, event_file: _EventFile, offset: int, size: int) -> None:
        if event_file.scanning:
            return  # junk to the end of what is written: said already, as a corrupt record
        now = self._clock()
        new = event_file.stuck_since is None or size != event_file.cut_size
        if new:
            event_file.stuck_since, event_file.cut_size = now, size  # new, or still growing
        if self._ended or (not new and now - event_file.stuck_since >= self.truncated_seconds):
            self._say(
                f"{event_file.rel}: the last record is cut short at byte {offset} (a writer "
                "that died mid-record?); it is read if it is ever completed"
            )

    def _take(
        self, event_file: _EventFile, record: bytes, start: int, rows: list[tuple[Row, int]]
    ) -> None:
        try:
            event = _tb().event_pb2.Event.FromString(record)
        except _tb().DecodeError:
            self._say(f"{event_file.rel}: a record at byte {start} is not an event, skipped")
            return
        if not event.HasField("summary"):
            return  # file_version, graphs, session logs: no metrics
        for value in event.summary.value:
            plugin = value.metadata.plugin_data.plugin_name
            if plugin == HPARAMS_PLUGIN:
                self._take_hparams(event_file, value.metadata.plugin_data.content)
                continue
            number = self._scalar(event_file, value, plugin)
            if number is None:
                continue
            tag = self._prefix(event_file.folder) + value.tag
            row = rows[-1][0] if rows else None
            if row is None or row["_step"] != event.step or tag in row:
                row = {"_step": int(event.step), "_timestamp": float(event.wall_time)}
                rows.append((row, event_file.read_offset))
            row[tag] = number
            rows[-1] = (row, event_file.read_offset)

    def _scalar(self, event_file: _EventFile, value, plugin: str) -> float | None:
        kind = value.WhichOneof("value")
        if kind == "simple_value":
            return value.simple_value  # v1 scalars (tensorboardX, torch's default)
        if kind != "tensor":
            return None  # images, histograms, audio
        # v2: the metadata that says "scalars" comes with a tag's first value only.
        if plugin == SCALARS_PLUGIN:
            event_file.scalar_tags.add(value.tag)
        elif plugin or value.tag not in event_file.scalar_tags:
            return None
        tensor = value.tensor
        if len(tensor.float_val) == 1:
            return tensor.float_val[0]
        if len(tensor.double_val) == 1:
            return tensor.double_val[0]
        try:
            array = _tb().tensor_util.make_ndarray(tensor)
            return float(array.item()) if array.size == 1 else None
        except (ValueError, TypeError):
            self._say(f"{event_file.rel}: tag {value.tag!r} holds no number, skipped")
            return None

    def _take_hparams(self, event_file: _EventFile, content: bytes) -> None:
        try:
            data = _tb().plugin_data_pb2.HParamsPluginData.FromString(content)
        except _tb().DecodeError:
            self._say(f"{event_file.rel}: unreadable hparams, skipped")
            return
        if not data.HasField("session_start_info"):
            return  # the experiment and session-end records carry no values
        for name, value in data.session_start_info.hparams.items():
            kind = value.WhichOneof("kind")
            if kind == "number_value":
                number = value.number_value
                self._params[name] = int(number) if number.is_integer() else number
            elif kind in ("string_value", "bool_value"):
                self._params[name] = getattr(value, kind)

    def _prefix(self, folder: str) -> str:
        if folder not in self._prefixes:
            first = not self._prefixes
            self._prefixes[folder] = "" if first or folder == "." else folder + "/"
        return self._prefixes[folder]
