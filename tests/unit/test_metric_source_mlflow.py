"""MlflowSource on a real MLflow file store: a real script (mlflow.log_metric / log_param /
set_tag into `file://<dir>/mlruns`) runs as a subprocess and writes it; a test only cuts or
damages a file that script wrote."""

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from agentsys.metric_sources.mlflow_store import MlflowSource

# Logs loss = 1/step and acc = step/100 for each "log N" line on stdin and answers "ok";
# "params" logs params and a tag; "nan" logs a NaN loss. MLflow's file store appends each
# value to its metric's file before log_metric returns.
WRITER = textwrap.dedent(
    """
    import math, sys
    import mlflow

    mlflow.set_tracking_uri(sys.argv[1])
    mlflow.start_run(run_name="first")
    step = 0
    for line in sys.stdin:
        command, *args = line.split()
        if command == "log":
            for _ in range(int(args[0])):
                step += 1
                mlflow.log_metric("loss", 1.0 / step, step=step)
                mlflow.log_metric("acc", step / 100, step=step)
        elif command == "params":
            mlflow.log_params({"lr": 0.25, "optimizer": "sgd", "layers": 3})
            mlflow.set_tag("team", "vision")
        elif command == "nan":
            step += 1
            mlflow.log_metric("loss", math.nan, step=step)
        elif command == "second":
            mlflow.end_run()
            mlflow.start_run(run_name="second")
        print("ok", flush=True)
    mlflow.end_run()
    """
)


class Writer:
    def __init__(self, script: Path, store: Path):
        self.process = subprocess.Popen(
            [sys.executable, str(script), store.as_uri()],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "MLFLOW_ALLOW_FILE_STORE": "true"},  # as the executor sets it
        )

    def send(self, command: str) -> None:
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        assert self.process.stdout.readline().strip() == "ok"

    def close(self) -> None:
        self.process.stdin.close()
        assert self.process.wait(timeout=60) == 0


@pytest.fixture
def store(tmp_path):
    return tmp_path / "mlruns"


@pytest.fixture
def writer(tmp_path, store):
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    started = Writer(script, store)
    yield started
    if started.process.poll() is None:
        started.close()


def points(rows):
    """(step, key, value) of every point read, sorted: however the rows group them."""
    return sorted(
        (row["_step"], key, round(value, 6))
        for row in rows
        for key, value in row.items()
        if not key.startswith("_")
    )


def expected(first, last, prefix=""):
    return sorted(
        [(s, prefix + "loss", round(1 / s, 6)) for s in range(first, last + 1)]
        + [(s, prefix + "acc", round(s / 100, 6)) for s in range(first, last + 1)]
    )


def metric_file(store: Path, key: str) -> Path:
    (path,) = store.glob(f"*/*/metrics/{key}")
    return path


def test_metrics_with_steps_times_params_and_tags(store, writer):
    started = time.time()
    writer.send("params")
    writer.send("log 5")
    writer.close()
    source = MlflowSource(store)

    rows = source.peek()

    assert points(rows) == expected(1, 5)
    stamps = [row["_timestamp"] for row in rows]
    assert all(started - 1 <= stamp <= time.time() for stamp in stamps)
    assert source.params() == {"lr": 0.25, "optimizer": "sgd", "layers": 3, "tag.team": "vision"}
    assert source.problems == []
    assert source.name == "mlflow"


def test_a_store_not_made_yet_is_no_rows(store):
    source = MlflowSource(store)
    assert source.peek() == [] and source.params() == {} and source.problems == []


def test_peek_repeats_until_advance_and_only_what_is_appended_comes_next(store, writer):
    writer.send("log 3")
    source = MlflowSource(store)
    first = source.peek()
    assert points(first) == expected(1, 3)
    assert source.peek() == first  # not advanced past: the same rows again, none twice
    source.advance(len(first))
    assert source.peek() == []

    writer.send("log 2")  # the script goes on writing while it is read
    assert points(source.peek()) == expected(4, 5)


def test_a_resumed_source_starts_after_the_stored_rows(store, writer):
    writer.send("log 3")
    source = MlflowSource(store)
    rows = source.peek()
    source.advance(2)  # a store cut short: two rows stored, four not
    position = source.position()

    writer.send("log 1")
    resumed = MlflowSource(store)
    resumed.resume(position)
    assert points(resumed.peek()) == sorted(points(rows[2:]) + expected(4, 4))
    assert resumed.problems == []


def test_a_half_written_last_line_waits_for_the_next_read(store, writer):
    writer.send("log 4")
    writer.close()
    loss = metric_file(store, "loss")
    whole = loss.read_bytes()
    loss.write_bytes(whole[:-4])  # the last line as a writer mid-line leaves it
    source = MlflowSource(store)

    rows = source.peek()
    assert [s for s, k, _ in points(rows) if k == "loss"] == [1, 2, 3]
    source.advance(len(rows))
    assert source.peek() == []

    with loss.open("ab") as out:
        out.write(whole[-4:])  # ... and then finishes it
    assert points(source.peek()) == [(4, "loss", 0.25)]
    assert source.problems == []


def test_a_corrupt_line_is_said_once_and_the_rest_is_read(store, writer):
    writer.send("log 4")
    writer.close()
    loss = metric_file(store, "loss")
    lines = loss.read_bytes().splitlines(keepends=True)
    lines[1] = b"x" * (len(lines[1]) - 1) + b"\n"  # step 2's line damaged, same length
    loss.write_bytes(b"".join(lines))
    source = MlflowSource(store)

    rows = source.peek()
    assert [s for s, k, _ in points(rows) if k == "loss"] == [1, 3, 4]
    assert [s for s, k, _ in points(rows) if k == "acc"] == [1, 2, 3, 4]
    assert len(source.problems) == 1 and "loss" in source.problems[0]
    source.problems.clear()
    source.advance(len(rows))
    source.peek()
    assert source.problems == []


def test_a_nan_is_kept_and_a_second_run_gets_its_own_names(store, writer):
    writer.send("log 1")
    writer.send("nan")
    writer.send("second")
    writer.send("log 1")
    writer.close()
    source = MlflowSource(store)
    rows = source.peek()
    losses = [row["loss"] for row in rows if "loss" in row]
    assert losses[0] == 1.0 and losses[1] != losses[1]  # NaN: the watchdog alerts on it
    # The run started second has its keys prefixed with its run name, whatever its id.
    assert {key for row in rows for key in row if "/" in key} == {"second/loss", "second/acc"}
