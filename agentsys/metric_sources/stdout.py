"""Metrics from what a run prints: its stdout and stderr, in the run directory's run.log.

Most printed lines are not metrics, so the rules are conservative; a line that matches none of
them is ignored silently. Per whole line (a last line without its newline is still being
written and waits for the next read):

1. The executor's retry marker (`--- retry N ---`) is skipped.
2. A run's `metrics_pattern` (a regex with named groups, see `compile_pattern`), when given and
   the line matches it: each named group whose text is a number becomes a metric, a group
   named `step` the row's `_step`; nothing else is tried on that line. A search taking longer
   than PATTERN_TIMEOUT (a pattern that backtracks catastrophically) skips the line; after
   MAX_PATTERN_TIMEOUTS such lines the pattern is dropped, so the watchdog never stalls.
3. A printed Python dict, as Hugging Face Trainer prints its logs
   (`{'loss': 2.3, 'learning_rate': 5e-05, 'epoch': 0.1}`): the `{...}` span is read with
   ast.literal_eval (a literal, never code); its numeric values (numbers, numeric strings,
   nan/inf) are the metrics, keys as written.
4. Otherwise the pairs found anywhere in the line, keys lower-cased (`Loss` is `loss`):
   - `key=value` (`step=100 loss=2.31 lr=3e-4`, also comma-separated): the value must not run
     on into a word, a date, a time or a version (`time=3s`, `date=2024-01-05`, `v=2.1.0`);
   - `key: value` (`Epoch: 3, loss: 0.52`): the value must end the line or be followed by a
     separator (`, ; | ( ) [ ] { }`) or another pair, so that `Error: 3 files` is not a metric;
   - `word value` (`step 100 | loss 2.31 | lr 0.001`, `step 10 loss 0.5`) only for a known
     metric word (KNOWN_WORDS, or one starting with val_/train_/eval_/test_/valid_, or ending
     with _loss/_acc/_accuracy), so that `Loading 3 files` is not a metric.
   A key's first pair wins. A key in capitals (`CUDA_VISIBLE_DEVICES=0`, `RANK=1`) is an
   environment variable or an id the script echoes, not a metric: skipped; so is a setting
   named in words with a spaced ` = ` (`Total optimization steps = 100`), and a value with a
   thousands separator (`Num examples = 1,000`).

Numbers: ints, floats, exponents (1e-3), nan and inf (any case, signed). A key named step,
global_step, iter or iteration with a whole non-negative value becomes `_step`; epoch stays a
metric. Every metric of one line shares one step: the line's own, else the count of the
metric lines before it that had none (0, 1, 2, …: Hugging Face Trainer's
`{'loss': …, 'learning_rate': …, 'epoch': …}` lines, which print no step, chart all three on
one x axis). A row with only a step is dropped. A line longer than LINE_CAP is skipped up to
its newline without being held in memory (the file is read in BLOCK_SIZE blocks); the
problems (over-long lines, pattern timeouts) are each said once.
"""

from __future__ import annotations

import ast
import logging
import math
import os
from pathlib import Path
from typing import Any

import regex

from agentsys.metric_sources.base import Row, Watched

logger = logging.getLogger(__name__)

LINE_CAP = 64 * 1024  # a longer line is not a metrics line: skipped, never held whole
BLOCK_SIZE = 256 * 1024  # read at most this much at once (plus a partial line under LINE_CAP)
PATTERN_TIMEOUT = 0.05  # seconds a metrics_pattern may take on one line
MAX_PATTERN_TIMEOUTS = 20  # lines timed out before the pattern is dropped for the run
MAX_PATTERN_LENGTH = 2000
DICT_CAP = 16 * 1024  # a `{...}` span longer than this is not a printed dict of metrics

STEP_KEYS = frozenset({"step", "global_step", "iter", "iteration"})
KNOWN_WORDS = frozenset(
    {
        "loss",
        "acc",
        "accuracy",
        "lr",
        "learning_rate",
        "step",
        "global_step",
        "iter",
        "iteration",
        "epoch",
        "perplexity",
        "ppl",
        "grad_norm",
        "reward",
        "return",
        "f1",
        "auc",
        "bleu",
        "mse",
        "mae",
        "rmse",
        "top1",
        "top5",
        "precision",
        "recall",
        "entropy",
        "kl",
    }
)
KNOWN_PREFIXES = ("val_", "train_", "eval_", "test_", "valid_")
KNOWN_SUFFIXES = ("_loss", "_acc", "_accuracy")

_NUMBER = r"[-+]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|(?i:nan|inf(?:inity)?))"
_KEY = r"[A-Za-z_][\w./-]*"
_SEPARATOR_OR_PAIR = rf"(?=\s*(?:$|[,;|()\[\]{{}}])|\s+{_KEY}\s*[:=]|\s+{_KEY}\s+{_NUMBER})"
# `1,000` is a thousand, not a 1: a value followed by a digit group is no metric's.
_EQUALS = regex.compile(rf"(?<![\w./-])({_KEY})(\s*=\s*)({_NUMBER})(?![\w.:/-]|,\d)")
_COLON = regex.compile(rf"(?<![\w./-])({_KEY})\s*:\s*({_NUMBER})(?![\w.:]|,\d){_SEPARATOR_OR_PAIR}")
_WORD = regex.compile(rf"(?<![\w./-])({_KEY})\s+({_NUMBER})(?![\w.-]|,\d)")
_ENDS_A_PHRASE = regex.compile(r"[A-Za-z]\s+$")
_IS_NUMBER = regex.compile(_NUMBER)
_RETRY_MARKER = regex.compile(r"--- retry \d+ ---")  # agentsys.agents.executor writes it
_BARE_NAN_INF = regex.compile(r"(?<![\w.'\"])(-?)(nan|inf)(?![\w'\"])")
_MAYBE_NUMBER = frozenset("0123456789nNiI")


def compile_pattern(text: str) -> regex.Pattern:
    """A run's `metrics_pattern`, compiled; ValueError saying why when it cannot be used."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("metrics_pattern is empty")
    if len(text) > MAX_PATTERN_LENGTH:
        raise ValueError(f"metrics_pattern is {len(text)} characters; at most {MAX_PATTERN_LENGTH}")
    try:
        compiled = regex.compile(text)
    except (regex.error, OverflowError, RecursionError) as error:
        raise ValueError(f"metrics_pattern does not compile: {error}") from None
    if not compiled.groupindex:
        raise ValueError(
            "metrics_pattern has no named group: name each value to chart, "
            r"e.g. loss=(?P<loss>\S+)"
        )
    return compiled


def number(text: str) -> int | float | None:
    """The number `text` spells (int when whole digits), or None."""
    text = text.strip()
    if not _IS_NUMBER.fullmatch(text):
        return None
    try:
        value = int(text)
    except ValueError:
        return float(text)
    # Past int64 a value is no count: a float (inf when out of range) that JSON stores.
    return value if -(2**63) <= value < 2**63 else float(text)


def _row_from(pairs: dict[str, Any]) -> Row | None:
    """A row from metric name -> number; a step key becomes `_step`; None with no metric."""
    row: Row = {}
    for key, value in pairs.items():
        if key in STEP_KEYS or key == "_step":
            if "_step" not in row and _whole(value):
                row["_step"] = int(value)
            continue
        row[key] = value
    if len(row) == ("_step" in row):  # no metric, at most a step
        return None
    return row


def _whole(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and math.isfinite(value)
        and value >= 0
        and value == int(value)
    )


def _environment_name(key: str) -> bool:
    """`CUDA_VISIBLE_DEVICES=0`, `RANK=1`, `PID: 4242`: a setting or an id a script echoes,
    in capitals as environment variables are written, not a metric it logs."""
    return len(key) > 1 and key.isupper()


def _spelled_out_setting(line: str, match) -> bool:
    """`Total optimization steps = 100`, `Num Epochs = 3` (Hugging Face Trainer's banner): a
    setting named in words, ` = ` spaced, is the script describing its run, not a metric."""
    if match.re is not _EQUALS:
        return False
    spaced = match.group(2)
    return (
        spaced[:1].isspace()
        and spaced[-1:].isspace()
        and bool(_ENDS_A_PHRASE.search(line, 0, match.start(1)))
    )


def _known_word(key: str) -> bool:
    return key in KNOWN_WORDS or key.startswith(KNOWN_PREFIXES) or key.endswith(KNOWN_SUFFIXES)


def parse_common(line: str) -> Row | None:
    """The metrics of one printed line by the common shapes (the module's rules 3 and 4)."""
    if not _MAYBE_NUMBER.intersection(line):
        return None  # no digit, nan or inf: nothing to find (most lines)
    if "{" in line and "}" in line and (row := _printed_dict(line)) is not None:
        return row
    pairs: dict[str, Any] = {}
    for shape in (_EQUALS, _COLON):
        for match in shape.finditer(line):
            if _environment_name(match.group(1)) or _spelled_out_setting(line, match):
                continue
            key = match.group(1).lower()
            if key not in pairs:
                pairs[key] = number(match.group(match.lastindex))
    for match in _WORD.finditer(line):
        key = match.group(1).lower()
        if key not in pairs and _known_word(key):
            pairs[key] = number(match.group(2))
    return _row_from(pairs) if pairs else None


def _printed_dict(line: str) -> Row | None:
    start, end = line.find("{"), line.rfind("}")
    if end <= start or end - start > DICT_CAP or ":" not in line[start:end]:
        return None
    # Python prints nan and inf bare; a literal needs them quoted (read back as numbers below).
    span = _BARE_NAN_INF.sub(r"'\1\2'", line[start : end + 1])
    try:
        value = ast.literal_eval(span)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    if not isinstance(value, dict):
        return None
    pairs: dict[str, Any] = {}
    for key, item in value.items():
        if not isinstance(key, str):
            continue
        if isinstance(item, str):
            item = number(item)
        if isinstance(item, int | float) and not isinstance(item, bool):
            pairs[key] = item
    return _row_from(pairs)


class StdoutSource:
    """Incremental reader of run.log: byte offset and inode like agentsys.metrics.MetricsTail,
    but read in bounded blocks (a line may be hundreds of megabytes)."""

    name = "stdout"

    def __init__(self, log_path: str | os.PathLike[str], pattern: str | None = None):
        self.path = Path(log_path)
        self.problems: list[str] = []
        self._said: set[str] = set()
        self.pattern: regex.Pattern | None = None
        if pattern:
            try:
                self.pattern = compile_pattern(pattern)
            except ValueError as error:  # validated by the API; a config edited by hand is not
                self._say("pattern", f"{error}; the common line shapes are read instead")
        self._pattern_timeouts = 0
        self._offset, self._inode = 0, None  # past the stored rows
        self._stepless = 0  # metric lines with no step of their own, up to _offset
        self._rows: list[Row] = []  # read, not yet advanced past
        self._ends: list[int] = []  # byte offset just past each of _rows
        self._counts: list[int] = []  # _stepless just past each of _rows
        self._read_stepless = 0  # _stepless up to _read_end
        self._read_end, self._read_inode = 0, None  # past the last whole line read
        self._skipping_at: int | None = None  # inside an over-long line: scanned up to here
        self.largest_read = 0  # the most bytes held at once (LINE_CAP + BLOCK_SIZE at most)

    # MetricSource

    def peek(self) -> list[Row]:
        try:
            handle = self.path.open("rb")
        except OSError:
            return list(self._rows)  # not created yet, or gone
        with handle:
            self._read(handle)
        return list(self._rows)

    def advance(self, count: int) -> None:
        count = min(count, len(self._rows))
        if count <= 0:
            return
        # Past the last row read is past every whole line read: the rest printed no metric.
        offset = self._read_end if count == len(self._rows) else self._ends[count - 1]
        self._stepless = self._counts[count - 1]
        del self._rows[:count], self._ends[:count], self._counts[:count]
        self._offset, self._inode = offset, self._read_inode

    def position(self) -> dict[str, Any]:
        return {"offset": self._offset, "inode": self._inode, "stepless": self._stepless}

    def resume(self, position: dict[str, Any]) -> None:
        offset, inode = position.get("offset"), position.get("inode")
        stepless = position.get("stepless")
        offset = offset if isinstance(offset, int) and offset >= 0 else 0
        inode = inode if isinstance(inode, int) else None
        self._offset, self._inode = offset, inode
        self._stepless = stepless if isinstance(stepless, int) and stepless >= 0 else 0
        self._restart_at(offset, inode)

    def params(self) -> dict[str, Any]:
        return {}  # printed lines carry no hyperparameters we could tell apart

    def watched(self) -> list[Watched]:
        return [Watched(self.path.parent, names=frozenset({self.path.name}))]

    # Reading

    def _restart_at(self, offset: int, inode: int | None) -> None:
        # A file read again from its start (truncated, replaced) counts on: its stepless
        # lines come after those already stored.
        self._rows, self._ends, self._counts = [], [], []
        self._read_end, self._read_inode = offset, inode
        self._read_stepless = self._stepless
        self._skipping_at = None

    def _read(self, handle) -> None:
        stat = os.fstat(handle.fileno())
        if stat.st_ino != self._read_inode or stat.st_size < self._read_end:
            # Truncated, or replaced by a new file: read it from the start.
            self._restart_at(0, stat.st_ino)
        if self._skipping_at is not None and not self._skip_long_line(handle):
            return
        handle.seek(self._read_end)
        partial = b""  # the start of a line whose newline is not read yet
        while block := handle.read(BLOCK_SIZE):
            data = partial + block if partial else block
            self.largest_read = max(self.largest_read, len(data))
            last = data.rfind(b"\n")
            if last >= 0:
                self._take_lines(data, last)
                partial = data[last + 1 :]
            else:
                partial = data
            if len(partial) > LINE_CAP:
                self._skipping_at = self._read_end + len(partial)
                self._say_long_line(self._read_end)
                partial = b""
                if not self._skip_long_line(handle):
                    return
                handle.seek(self._read_end)

    def _skip_long_line(self, handle) -> bool:
        """Scan on to the over-long line's newline; False when the file ends first."""
        handle.seek(self._skipping_at)
        while block := handle.read(BLOCK_SIZE):
            newline = block.find(b"\n")
            if newline >= 0:
                self._read_end = self._skipping_at + newline + 1
                self._skipping_at = None
                return True
            self._skipping_at += len(block)
        return False

    def _take_lines(self, data: bytes, last: int) -> None:
        """Parse the whole lines in data[: last + 1], which starts at self._read_end."""
        end = self._read_end
        for raw in data[:last].split(b"\n"):
            start, end = end, end + len(raw) + 1
            if len(raw) > LINE_CAP:
                self._say_long_line(start)
                continue
            row = self._parse(raw)
            if row is not None:
                if "_step" not in row:
                    row["_step"] = self._read_stepless
                    self._read_stepless += 1
                self._rows.append(row)
                self._ends.append(end)
                self._counts.append(self._read_stepless)
        self._read_end = end

    def _parse(self, raw: bytes) -> Row | None:
        line = raw.decode("utf-8", "replace")
        if "\r" in line:  # progress bars redraw with \r: the text last drawn is what shows
            line = line.rsplit("\r", 1)[-1] or line.rstrip("\r").rsplit("\r", 1)[-1]
        if line.startswith("--- retry") and _RETRY_MARKER.fullmatch(line.strip()):
            return None
        if self.pattern is not None:
            try:
                match = self.pattern.search(line, timeout=PATTERN_TIMEOUT)
            except TimeoutError:
                self._pattern_timed_out(line)
                return None
            if match is not None:
                return self._pattern_row(match)
        return parse_common(line)

    def _pattern_row(self, match) -> Row | None:
        pairs: dict[str, Any] = {}
        for key, text in match.groupdict().items():
            value = number(text) if text is not None else None
            if value is not None:
                pairs[key] = value
        return _row_from(pairs)

    def _pattern_timed_out(self, line: str) -> None:
        self._pattern_timeouts += 1
        self._say("pattern_timeout", f"metrics_pattern timed out on a line: {line[:200]!r}")
        if self._pattern_timeouts >= MAX_PATTERN_TIMEOUTS:
            self.pattern = None
            self._say(
                "pattern_dropped",
                f"metrics_pattern timed out on {MAX_PATTERN_TIMEOUTS} lines; "
                "the common line shapes are read instead",
            )

    def _say_long_line(self, offset: int) -> None:
        self._say(
            "long_line",
            f"run.log: skipped a line longer than {LINE_CAP // 1024} KiB at byte {offset} "
            "(and any later ones)",
        )

    def _say(self, kind: str, message: str) -> None:
        if kind not in self._said:
            self._said.add(kind)
            self.problems.append(message)
            logger.info("%s: %s", self.path, message)
