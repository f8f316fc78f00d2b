"""Metrics and config from a Weights & Biases run logged offline into the run dir: the executor
runs a run that sets no WANDB_MODE and no WANDB_API_KEY with WANDB_MODE=offline and
WANDB_DIR=<run_dir>/wandb, so `wandb.init()` / `wandb.log()` write their transaction log to
`<run_dir>/wandb/wandb/offline-run-<time>-<id>/run-<id>.wandb`. A run that logs online is left
alone: this source reads nothing of it.

The file is read with wandb's own reader: `wandb.sdk.internal.datastore.DataStore` (its
leveldb-log framing: 32 KiB blocks of CRC-checked records, a record spanning blocks in
FIRST/MIDDLE/LAST pieces) and wandb's `Record` protos (`wandb.proto.wandb_internal_pb2`): no
record parser of ours. That reader was dropped from the wheel in wandb 0.30, so wandb is
pinned at 0.29.0 (it writes and reads the same format; pyproject.toml). Its `open_for_scan`
opens the file for writing too and always starts at byte 0, so we hand it the bytes appended
since the last read (at most `read_chunk`, 16 MiB) at the file offset where they start: the
offset just past the last whole record read, carried in position().

wandb's core process writes the log a 32 KiB block at a time (the last block when the run
finishes), so a live run's W&B series move a block at a time: a few hundred `wandb.log` calls
of a few metrics each. A step logged with `step=` is written once the next step is logged.

What a row is: one history record (one `wandb.log` call), its numeric values by key, with
`_step` and `_timestamp` (wandb's own `_runtime` and other `_` keys are left out); a nested
dict is flattened with `.` as W&B shows it (`{"val": {"loss": 1}}` is `val.loss`). A NaN is kept:
the watchdog alerts on it. A run resumed or retried logs into a new offline-run folder with the
same run id (WANDB_RUN_ID is the executor's id): its keys are the same metrics, not prefixed.

params(): the run's config (`wandb.init(config=...)`, `wandb.config.update`), wandb's own
`_wandb` entry left out.

Bad input never raises. A record that comes up short (the writer is mid-record) waits for the
next read; only if it stays short for `truncated_seconds` (30 s) with the file not growing, or
at the run's last read, is that said, once. A record whose CRC or framing is wrong is said once
("a corrupt record at byte N") and the reader goes on at the next 32 KiB block, as leveldb's
own reader recovers.
DataStore checks CRCs with `assert`: the daemon must not run under `python -O`.
"""

from __future__ import annotations

import io
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentsys.metric_sources.base import Row, Watched
from agentsys.metric_sources.tailed import TailedFiles

logger = logging.getLogger(__name__)

OFFLINE_RUN_FILES = ("offline-run-*/run-*.wandb", "wandb/offline-run-*/run-*.wandb")
READ_CHUNK = 16 * 1024 * 1024
BLOCK = 32768  # the leveldb log's block: a corrupt stretch is skipped to the next one
HEADER_LEN = 7  # the file's header and each record's header
MIDDLE, LAST = 3, 4  # the pieces of a record that spans blocks, after its FIRST
WANDB_KEYS = frozenset({"_wandb"})


@dataclass
class _RunFile:
    path: Path
    rel: str
    read_offset: int = 0  # just past the last whole record read (0: its header not read yet)
    stored_offset: int = 0
    pending: int = 0
    scanning: bool = False  # inside a corrupt stretch
    stuck_since: float | None = None
    cut_size: int = -1
    chunk_size: int = READ_CHUNK
    unreadable: bool = False  # not a W&B transaction log: never read again


class _Chunk(io.BytesIO):
    """The bytes read from the file from offset `base`, as the file object DataStore reads
    (its block arithmetic uses its own `_index`, the file offset); a read that comes up short
    (the end of what is written) is noted."""

    def __init__(self, data: bytes, base: int):
        super().__init__(data)
        self.base = base
        self.short = False

    def read(self, size: int | None = -1) -> bytes:
        data = super().read(size)
        if size is not None and size >= 0 and len(data) < size:
            self.short = True
        return data


class WandbSource(TailedFiles):
    name = "wandb"

    def __init__(
        self,
        root: Path,
        *,
        truncated_seconds: float = 30.0,
        read_chunk: int = READ_CHUNK,
        clock: Callable[[], float] = time.monotonic,
    ):
        super().__init__()
        self.root = Path(root)
        self.truncated_seconds = truncated_seconds
        self.read_chunk = read_chunk
        self._clock = clock
        self._params: dict[str, Any] = {}
        self._ended = False  # the run has ended: a cut-short record stays so

    # -- the MetricSource protocol -------------------------------------------------------

    def peek(self) -> list[Row]:
        for pattern in OFFLINE_RUN_FILES:
            for path in sorted(self.root.glob(pattern)):
                self._track(path)
        for run_file in list(self._files.values()):
            try:
                self._read(run_file)
            except Exception as exc:  # user files: whatever the reader trips on, go on
                logger.debug("reading %s failed", run_file.path, exc_info=True)
                self._say(f"wandb: {run_file.rel} could not be read ({exc}); the rest goes on")
        return [row for row, _, _ in self._pending]

    def position(self) -> dict[str, Any]:
        files = {key: self._saved_offset(f) for key, f in self._files.items()}
        return {"files": files, "params": dict(self._params)}

    def resume(self, position: dict[str, Any]) -> None:
        try:
            self._params.update(position["params"])
            for rel, offset in position["files"].items():
                run_file = self._track(self.root / rel)
                run_file.read_offset = run_file.stored_offset = max(0, int(offset))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            self._say(f"wandb: the saved position could not be used ({exc!r})")

    def params(self) -> dict[str, Any]:
        return dict(self._params)

    def watched(self) -> list[Watched]:
        return [Watched(self.root, recursive=True)]

    def finishing(self) -> None:
        """The run has ended: a last record still cut short is said at once (no writer is
        left to complete it; a script killed mid-write, a log cut short)."""
        self._ended = True

    # -- reading one file -----------------------------------------------------------------

    def _track(self, path: Path) -> _RunFile:
        rel = path.relative_to(self.root).as_posix()
        if rel not in self._files:
            self._files[rel] = _RunFile(path, rel, chunk_size=self.read_chunk)
        return self._files[rel]

    def _read(self, run_file: _RunFile) -> None:
        if run_file.unreadable:
            return
        try:
            size = run_file.path.stat().st_size
            if size <= run_file.read_offset:
                return  # nothing new: one stat
            if not run_file.pending:
                run_file.stored_offset = run_file.read_offset
            with run_file.path.open("rb") as handle:
                handle.seek(run_file.read_offset)
                data = handle.read(min(size - run_file.read_offset, run_file.chunk_size))
        except FileNotFoundError:
            self._say(f"wandb: {run_file.rel} deleted, no longer read")
            return
        except OSError as exc:
            self._say(f"wandb: {run_file.rel} unreadable ({exc.strerror or exc})")
            return
        capped = run_file.read_offset + len(data) < size
        base = run_file.read_offset
        self._scan(run_file, _Chunk(data, base), size, capped)
        if capped and run_file.read_offset == base:
            run_file.chunk_size *= 2  # one record bigger than a chunk: take more next time

    def _scan(self, run_file: _RunFile, chunk: _Chunk, size: int, capped: bool) -> None:
        from wandb.sdk.internal.datastore import DataStore

        store = DataStore()
        # What open_for_scan sets, but on our bytes, from the file offset they start at.
        store._fp = chunk
        store._opened_for_scan = True
        store._index = chunk.base
        if run_file.read_offset == 0:
            try:
                store._read_header()
            except Exception:
                if chunk.short:
                    return  # the header is being written
                self._say(f"wandb: {run_file.rel} is not a W&B transaction log, not read")
                run_file.unreadable = True
                return
            run_file.read_offset = store._index
        resync = run_file.scanning  # resumed at a block start inside a corrupt stretch
        while True:
            start = store._index
            chunk.short = False
            try:
                if resync:
                    start = self._skip_pieces(store, chunk)
                    run_file.read_offset, resync = start, False
                data = store.scan_data()
            except Exception:
                if chunk.short:  # the end of what is written, mid-record
                    if not capped:
                        self._cut_short(run_file, start, size)
                    return
                if not run_file.scanning:
                    self._say(f"wandb: {run_file.rel}: a corrupt record at byte {start}, skipped")
                    run_file.scanning = True
                run_file.read_offset = (start // BLOCK + 1) * BLOCK
                if run_file.read_offset >= chunk.base + len(chunk.getbuffer()):
                    return  # the next block is not written yet
                store._index = run_file.read_offset
                chunk.seek(run_file.read_offset - chunk.base)
                resync = True
                continue
            if data is None:  # the end of what is written (a record in pieces waits whole)
                run_file.stuck_since = None
                return
            run_file.scanning = False
            run_file.stuck_since = None
            run_file.read_offset = store._index
            self._take(run_file, data, start)

    @staticmethod
    def _skip_pieces(store, chunk: _Chunk) -> int:
        """At a block start past a corrupt record: step over the pieces (MIDDLE, LAST) of a
        record whose start was lost, with DataStore's own record reader, as leveldb's reader
        resynchronises; the offset of the next whole record or first piece."""
        while True:
            start = store._index
            if BLOCK - start % BLOCK < HEADER_LEN:
                return start  # the block's zero padding: scan_data steps over it
            piece = store.scan_record()
            if piece is None or piece[0] not in (MIDDLE, LAST):
                store._index = start
                chunk.seek(start - chunk.base)
                return start

    def _cut_short(self, run_file: _RunFile, offset: int, size: int) -> None:
        now = self._clock()
        new = run_file.stuck_since is None or size != run_file.cut_size
        if new:
            run_file.stuck_since, run_file.cut_size = now, size
        if self._ended or (not new and now - run_file.stuck_since >= self.truncated_seconds):
            self._say(
                f"wandb: {run_file.rel}: the last record is cut short at byte {offset} (a "
                "writer that died mid-record?); it is read if it is ever completed"
            )

    def _take(self, run_file: _RunFile, data: bytes, start: int) -> None:
        from google.protobuf.message import DecodeError
        from wandb.proto import wandb_internal_pb2

        try:
            record = wandb_internal_pb2.Record.FromString(data)
        except DecodeError:
            self._say(f"wandb: {run_file.rel}: a record at byte {start} is not a W&B record")
            return
        kind = record.WhichOneof("record_type")
        if kind == "history":
            row = self._row(record.history)
            if row is not None:
                self._pending.append((row, run_file.rel, run_file.read_offset))
                run_file.pending += 1
        elif kind == "config":
            self._take_config(record.config)
        elif kind == "run":
            self._take_config(record.run.config)

    def _row(self, history) -> Row | None:
        row: Row = {}
        for item in history.item:
            key = item.key or ".".join(item.nested_key)
            try:
                value = json.loads(item.value_json)
            except ValueError:
                continue
            if key == "_step" and _is_number(value):
                row["_step"] = int(value)
            elif key == "_timestamp" and _is_number(value):
                row["_timestamp"] = float(value)
            elif not key.startswith("_"):
                _flatten(row, key, value)
        if "_step" not in row and history.HasField("step"):
            row["_step"] = int(history.step.num)
        if not any(not key.startswith("_") for key in row):
            return None  # only media, tables or text: nothing to chart
        return row

    def _take_config(self, config) -> None:
        for item in config.update:
            key = item.key or ".".join(item.nested_key)
            if key in WANDB_KEYS:
                continue
            try:
                value = json.loads(item.value_json)
            except ValueError:
                continue
            # wandb keeps a config value as {"value": v, "desc": ...} in some versions.
            if isinstance(value, dict) and set(value) <= {"value", "desc"} and "value" in value:
                value = value["value"]
            self._params[key] = value


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _flatten(row: Row, key: str, value: Any) -> None:
    if _is_number(value):
        row[key] = float(value)
    elif isinstance(value, dict) and "_type" not in value:  # a media or table entry has _type
        for inner, inner_value in value.items():
            _flatten(row, f"{key}.{inner}", inner_value)
