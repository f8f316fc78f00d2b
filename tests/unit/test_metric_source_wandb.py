"""WandbSource on a real offline W&B run: a real script (wandb.init(mode="offline") and
wandb.log) runs as a subprocess and writes `<dir>/wandb/offline-run-*/run-*.wandb`; a test only
cuts or damages a file that script wrote."""

import math
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from agentsys.metric_sources.wandb_offline import BLOCK, WandbSource

# Logs loss = 1/step and acc = step/100 for each "log N" line on stdin and answers "ok";
# "nan" logs a NaN loss. wandb hands each record to its core process, which writes the
# transaction log when it will: a reader polls, as AgentSys does.
WRITER = textwrap.dedent(
    """
    import math, sys
    import wandb

    run = wandb.init(
        mode="offline", dir=sys.argv[1], project="unit",
        config={"lr": 0.25, "optimizer": "sgd", "layers": 3},
    )
    step = 0
    for line in sys.stdin:
        command, *args = line.split()
        if command == "log":
            for _ in range(int(args[0])):
                step += 1
                wandb.log({"loss": 1.0 / step, "acc": step / 100, "val": {"loss": 2.0}}, step=step)
        elif command == "nan":
            step += 1
            wandb.log({"loss": math.nan}, step=step)
        elif command == "config":
            wandb.config.update({"batch": 32})
        print("ok", flush=True)
    run.finish()
    """
)


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env.update(WANDB_SILENT="true", WANDB_MODE="offline")
    return env


class Writer:
    def __init__(self, script: Path, root: Path):
        self.process = subprocess.Popen(
            [sys.executable, str(script), str(root)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=environment(),
        )

    def send(self, command: str) -> None:
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        assert self.process.stdout.readline().strip() == "ok"

    def close(self) -> None:
        self.process.stdin.close()
        assert self.process.wait(timeout=120) == 0


@pytest.fixture
def writer(tmp_path):
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    (tmp_path / "root").mkdir()
    started = Writer(script, tmp_path / "root")
    yield started
    if started.process.poll() is None:
        started.close()


@pytest.fixture
def root(tmp_path):
    return tmp_path / "root"


def losses(rows):
    """(step, loss) of each row with a loss, a NaN as the string "nan" (NaN != NaN)."""
    return [
        (row["_step"], "nan" if math.isnan(row["loss"]) else round(row["loss"], 6))
        for row in rows
        if "loss" in row
    ]


def expected(first, last):
    return [(s, round(1 / s, 6)) for s in range(first, last + 1)]


def read_until(source: WandbSource, count: int) -> list[dict]:
    """Peek until `count` loss points are pending (wandb's core writes when it will)."""
    deadline = time.monotonic() + 30
    while len(losses(rows := source.peek())) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    return rows


def run_file(root: Path) -> Path:
    (path,) = root.glob("wandb/offline-run-*/run-*.wandb")
    return path


def test_history_rows_with_steps_times_and_the_config(root, writer):
    started = time.time()
    writer.send("log 5")
    writer.send("config")
    writer.close()
    source = WandbSource(root)

    rows = source.peek()

    assert losses(rows) == expected(1, 5)
    assert [row["acc"] for row in rows] == pytest.approx([s / 100 for s in range(1, 6)])
    assert all(row["val.loss"] == 2.0 for row in rows)  # a nested dict, flattened
    assert all(started - 1 <= row["_timestamp"] <= time.time() for row in rows)
    keys = {key for row in rows for key in row}
    assert keys == {"_step", "_timestamp", "loss", "acc", "val.loss"}  # no _runtime
    assert source.params() == {"lr": 0.25, "optimizer": "sgd", "layers": 3, "batch": 32}
    assert source.problems == []
    assert source.name == "wandb"


def test_nothing_logged_yet_is_no_rows(root):
    source = WandbSource(root)
    assert source.peek() == [] and source.problems == []


def test_read_while_the_script_logs_peek_repeats_until_advance(root, writer):
    source = WandbSource(root)
    writer.send("log 3")
    time.sleep(1)
    # wandb's core writes its log a 32 KiB block at a time: three steps are not on disk yet.
    assert source.peek() == [] and source.problems == []
    writer.send("log 600")
    first = read_until(source, 1)
    assert 0 < len(losses(first)) < 603
    assert losses(first) == expected(1, len(losses(first)))
    # Not advanced past: the same rows again (and any wandb flushed since, after them).
    again = source.peek()
    assert again[: len(first)] == first
    source.advance(len(first))
    newer = again[len(first) :]
    assert source.peek()[: len(newer)] == newer  # from where it advanced to

    writer.send("log 2")
    writer.close()
    rest = source.peek()
    assert losses(first) + losses(rest) == expected(1, 605)  # each step once, in order
    assert source.problems == []


def test_a_resumed_source_starts_after_the_stored_rows(root, writer):
    writer.send("log 4")
    writer.close()
    source = WandbSource(root)
    rows = source.peek()
    source.advance(1)  # a store cut short: one row stored
    resumed = WandbSource(root)
    resumed.resume(source.position())
    assert losses(resumed.peek()) == losses(rows[1:])
    assert resumed.params() == source.params()


def test_a_half_written_record_waits_and_a_corrupt_one_is_said_once(root, writer):
    writer.send("log 600")
    writer.send("nan")
    writer.close()
    path = run_file(root)
    whole = path.read_bytes()
    assert len(whole) > 2 * BLOCK  # records past the first block, to read on to
    complete = WandbSource(root).peek()
    assert losses(complete) == [*expected(1, 600), (601, "nan")]

    # Cut inside a record: the records from it on wait, nothing is said.
    cut = len(whole) // 2
    path.write_bytes(whole[:cut])
    source = WandbSource(root)
    before = source.peek()
    assert 0 < len(losses(before)) < 601
    assert losses(before) == losses(complete)[: len(losses(before))]
    assert source.peek() == before and source.problems == []
    path.write_bytes(whole)  # the writer finishes the record
    assert losses(source.peek()) == losses(complete)
    assert source.problems == []

    # A flipped byte inside an early record: said once, the reader goes on at the next block.
    damaged = bytearray(whole)
    damaged[100] ^= 0xFF
    path.write_bytes(bytes(damaged))
    source = WandbSource(root)
    rows = source.peek()
    [problem] = source.problems
    assert 7 <= int(re.search(r"a corrupt record at byte (\d+)", problem).group(1)) <= 100
    assert losses(rows)[-1][0] == 601  # the blocks after it are read
    assert len(losses(rows)) < 601  # the rest of the first block is not
    source.problems.clear()
    source.advance(len(rows))
    source.peek()
    assert source.problems == []


def test_a_record_still_cut_short_at_the_runs_last_read_is_said_then(root, writer):
    writer.send("log 5")
    writer.close()
    path = run_file(root)
    whole = path.read_bytes()
    finished = WandbSource(root)
    finished.finishing()
    assert losses(finished.peek()) == expected(1, 5)
    assert finished.problems == []  # a run that finished leaves no record cut short

    path.write_bytes(whole[: len(whole) - 40])  # as a script killed mid-write leaves it
    source = WandbSource(root)
    source.advance(len(source.peek()))
    assert source.problems == []  # while the run goes, a writer mid-record is normal
    source.finishing()  # the run has ended: no writer will complete it
    source.peek()
    (problem,) = source.problems
    assert "the last record is cut short at byte" in problem
    source.peek()
    assert len(source.problems) == 1  # said once
