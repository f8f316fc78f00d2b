"""TensorBoardSource on real event files: real scripts (the demo's train_tensorboard.py, small
tensorboardX and tensorboard-writer scripts) run as subprocesses write them; a test only cuts
or damages a file such a writer wrote."""

import json
import re
import shutil
import struct
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from agentsys.metric_sources.tensorboard import TensorBoardSource

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "researchagent" / "demo_workspace" / "train_tensorboard.py"

# Logs loss = 1/step and acc = step/100 (tensorboardX, v1 simple_value) for each "log N" line
# on stdin and answers "ok"; "hparams" logs hyperparameters. tensorboardX writes from a queue
# in a thread of its own (flushing every flush_secs): a reader polls, as AgentSys does.
WRITER = textwrap.dedent(
    """
    import sys
    from tensorboardX import SummaryWriter

    writer = SummaryWriter(sys.argv[1], flush_secs=0.05)
    step = 0
    for line in sys.stdin:
        command, *args = line.split()
        if command == "log":
            for _ in range(int(args[0])):
                step += 1
                writer.add_scalar("loss", 1.0 / step, step)
                writer.add_scalar("acc", step / 100, step)
        elif command == "hparams":
            writer.add_hparams({"lr": 0.25, "optimizer": "sgd", "layers": 3}, {})
        writer.flush()
        print("ok", flush=True)
    writer.close()
    """
)

# TF2-style v2 scalars through tensorboard's own writer: a tensor with the scalars plugin's
# metadata on each tag's first value only, as tf.summary writes them.
V2_WRITER = textwrap.dedent(
    """
    import sys, time
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.plugins.scalar.summary_v2 import scalar_pb
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(sys.argv[1])
    for step in range(1, 6):
        summary = scalar_pb("val/loss", 10.0 - step)
        if step > 1:
            summary.value[0].ClearField("metadata")
        writer.add_event(Event(step=step, wall_time=time.time(), summary=summary))
    writer.close()
    """
)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Writer:
    """A live tensorboardX writer process, told what to log through its stdin."""

    def __init__(self, script: Path, logdir: Path):
        self.process = subprocess.Popen(
            [sys.executable, str(script), str(logdir)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def send(self, command: str) -> None:
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        assert self.process.stdout.readline().strip() == "ok"

    def close(self) -> None:
        self.process.stdin.close()
        assert self.process.wait(timeout=30) == 0


@pytest.fixture
def writer_script(tmp_path):
    path = tmp_path / "writer.py"
    path.write_text(WRITER)
    return path


@pytest.fixture
def writers(writer_script):
    started = []

    def start(logdir: Path) -> Writer:
        started.append(Writer(writer_script, logdir))
        return started[-1]

    yield start
    for writer in started:
        if writer.process.poll() is None:
            writer.close()


def write(writer_script: Path, logdir: Path, *commands: str) -> Path:
    """Run a writer to completion; the event file it wrote."""
    subprocess.run(
        [sys.executable, str(writer_script), str(logdir)],
        input="".join(c + "\n" for c in commands),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    (path,) = logdir.glob("events.out.tfevents.*")
    return path


def read_until(source: TensorBoardSource, count: int) -> list[dict]:
    """Peek until `count` points are pending (the writer's thread writes when it will)."""
    deadline = time.monotonic() + 20
    while points(rows := source.peek()) < count and time.monotonic() < deadline:
        time.sleep(0.02)
    return rows


def logged(rows):
    """(step, tag) of each point, in order: what was read, however steps split into rows."""
    return [(row["_step"], key) for row in rows for key in row if not key.startswith("_")]


def expected(first, last, prefix=""):
    return [(s, prefix + tag) for s in range(first, last + 1) for tag in ("loss", "acc")]


def steps(rows, key="loss"):
    return [row["_step"] for row in rows if key in row]


def points(rows):
    return sum(1 for row in rows for key in row if not key.startswith("_"))


def test_the_demo_script_is_read_with_its_values_steps_times_and_hparams(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    done = subprocess.run(
        [sys.executable, str(DEMO), "--steps", "50", "--sleep", "0", "--lr", "0.1"],
        cwd=work,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert not (work / "agent_metrics.jsonl").exists()
    printed = {int(s): float(v) for s, v in re.findall(r"step (\d+) loss ([\d.]+)", done.stdout)}
    # AgentSys's own folder is never read, even if an event file lands there.
    (work / ".agents").mkdir()
    for event_file in list(work.rglob("events.out.tfevents.*")):
        shutil.copy(event_file, work / ".agents" / event_file.name)

    source = TensorBoardSource(work)
    rows = source.peek()

    assert [row["_step"] for row in rows] == [10, 20, 30, 40, 50]
    assert {row["_step"]: round(row["loss"], 4) for row in rows} == printed
    assert all(row["lr"] == pytest.approx(0.1) for row in rows)
    stamps = [row["_timestamp"] for row in rows]
    assert stamps == sorted(stamps) and stamps[0] > 1.7e9
    assert source.params() == {"lr": 0.1, "steps": 50, "seed": 0}
    assert not any(".agents" in key for key in source.position()["files"])
    assert source.problems == []
    assert source.name == "tensorboard"


def test_only_what_a_running_script_appended_is_read_next(tmp_path, writers):
    writer = writers(tmp_path / "runs")
    writer.send("log 5")
    source = TensorBoardSource(tmp_path)
    first = read_until(source, 10)
    assert logged(first) == expected(1, 5)
    values = {
        (row["_step"], key): row[key] for row in first for key in ("loss", "acc") if key in row
    }
    assert values == {
        **{(s, "loss"): pytest.approx(1 / s) for s in range(1, 6)},
        **{(s, "acc"): pytest.approx(s / 100) for s in range(1, 6)},
    }
    source.advance(len(first))
    assert source.peek() == []
    writer.send("log 3")
    assert logged(read_until(source, 6)) == expected(6, 8)  # only the new ones


def test_peeked_rows_stay_until_advanced(tmp_path, writers):
    writer = writers(tmp_path / "runs")
    writer.send("log 4")
    source = TensorBoardSource(tmp_path)
    first = read_until(source, 8)
    assert logged(first) == expected(1, 4)
    assert source.peek() == first  # nothing advanced: the same rows again
    writer.send("log 2")
    assert logged(read_until(source, 12)) == expected(1, 6)  # the old ones first, then the new
    source.advance(len(first))
    assert logged(source.peek()) == expected(5, 6)


def test_a_resumed_source_neither_loses_nor_repeats_a_row(tmp_path, writers):
    writer = writers(tmp_path / "runs")
    writer.send("log 6")
    source = TensorBoardSource(tmp_path)
    rows = read_until(source, 12)
    assert logged(rows) == expected(1, 6)
    source.advance(3)  # the executor stored 3 rows, then went away before storing the rest
    saved = json.loads(json.dumps(source.position()))

    resumed = TensorBoardSource(tmp_path)
    resumed.resume(saved)
    unstored = logged(rows[3:])
    assert logged(resumed.peek()) == unstored
    writer.send("log 2")
    rows = read_until(resumed, len(unstored) + 4)
    assert logged(rows) == unstored + expected(7, 8)
    resumed.advance(len(rows))

    again = TensorBoardSource(tmp_path)
    again.resume(json.loads(json.dumps(resumed.position())))
    assert again.peek() == []
    writer.send("log 1")
    assert logged(read_until(again, 2)) == expected(9, 9)


def test_two_event_directories_do_not_collide(tmp_path, writer_script):
    logs = tmp_path / "lightning_logs"
    write(writer_script, logs / "version_0", "log 3")
    source = TensorBoardSource(tmp_path, rescan_seconds=0)
    assert steps(source.peek()) == [1, 2, 3]  # alone: bare tags, as the watchdog wants
    write(writer_script, logs / "version_1", "log 2")
    rows = source.peek()
    assert steps(rows) == [1, 2, 3]  # the first directory keeps its names
    later = [row for row in rows if "lightning_logs/version_1/loss" in row]
    assert [row["_step"] for row in later] == [1, 2]
    assert all(set(row) == {"_step", "_timestamp", "lightning_logs/version_1/loss",
                            "lightning_logs/version_1/acc"} for row in later)  # fmt: skip
    # A resumed source names them the same way.
    resumed = TensorBoardSource(tmp_path)
    resumed.resume(source.position())
    assert {key for row in resumed.peek() for key in row} == set().union(*rows)


def test_hparams_go_to_params_and_survive_a_resume(tmp_path, writer_script):
    write(writer_script, tmp_path / "runs", "hparams", "log 2")
    source = TensorBoardSource(tmp_path)
    rows = source.peek()
    assert steps(rows) == [1, 2]
    assert source.params() == {"lr": 0.25, "optimizer": "sgd", "layers": 3}
    source.advance(len(rows))
    resumed = TensorBoardSource(tmp_path)
    resumed.resume(json.loads(json.dumps(source.position())))
    assert resumed.peek() == []
    assert resumed.params() == {"lr": 0.25, "optimizer": "sgd", "layers": 3}


def test_v2_tensor_scalars_are_read_even_without_metadata_after_the_first(tmp_path):
    script = tmp_path / "v2.py"
    script.write_text(V2_WRITER)
    subprocess.run([sys.executable, str(script), str(tmp_path / "tf2")], check=True, timeout=60)
    source = TensorBoardSource(tmp_path)
    rows = source.peek()
    assert [(row["_step"], row["val/loss"]) for row in rows] == [(s, 10.0 - s) for s in range(1, 6)]
    source.advance(2)
    resumed = TensorBoardSource(tmp_path)  # the metadata came with step 1, before the offset
    resumed.resume(json.loads(json.dumps(source.position())))
    assert steps(resumed.peek(), "val/loss") == [3, 4, 5]


def test_a_corrupt_record_is_skipped_said_once_and_the_rest_read(tmp_path, writer_script):
    path = write(writer_script, tmp_path / "runs", "log 10")
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle] ^= 0xFF  # one flipped byte: one record's CRC no longer checks
    path.write_bytes(bytes(data))
    other = write(writer_script, tmp_path / "runs" / "other", "log 2")

    source = TensorBoardSource(tmp_path)
    rows = source.peek()
    mine = [row for row in rows if "loss" in row or "acc" in row]
    assert points(mine) == 19  # 10 steps x 2 tags, less the one damaged record
    assert steps(mine, "acc")[-1] == 10  # what follows the damage is read
    assert len(source.problems) == 1
    (problem,) = source.problems
    assert problem.startswith(f"{path.relative_to(tmp_path).as_posix()}: a corrupt record at byte")
    assert int(re.search(r"byte (\d+)", problem).group(1)) <= middle
    assert any("runs/other/loss" in row for row in rows)  # the other file too
    source.problems.clear()
    source.advance(len(rows))
    assert source.peek() == [] and source.problems == []  # said once
    assert other.exists()


def test_a_cut_short_last_record_is_read_once_complete(tmp_path, writer_script):
    path = write(writer_script, tmp_path / "runs", "log 10")
    whole = path.read_bytes()
    path.write_bytes(whole[:-5])  # as a writer that flushed mid-record leaves it
    clock = Clock()
    source = TensorBoardSource(tmp_path, clock=clock, truncated_seconds=30)
    rows = source.peek()
    assert steps(rows) == list(range(1, 11))
    assert steps(rows, "acc") == list(range(1, 10))  # step 10's acc is the cut record
    source.advance(len(rows))
    assert source.problems == []  # a writer mid-record is normal
    clock.now += 31
    assert source.peek() == []
    assert len(source.problems) == 1 and "cut short at byte" in source.problems[0]
    clock.now += 31
    source.peek()
    assert len(source.problems) == 1  # said once

    with path.open("ab") as handle:
        handle.write(whole[-5:])  # the writer finishes the record
    (row,) = source.peek()
    assert row["_step"] == 10 and row["acc"] == pytest.approx(0.1) and "loss" not in row


def _last_record_start(data: bytes) -> int:
    """Where the file's last record begins: each is an 8-byte length, its 4-byte CRC, the
    data, and the data's 4-byte CRC."""
    position = last = 0
    while position < len(data):
        last = position
        position += 16 + struct.unpack("<Q", data[position : position + 8])[0]
    return last


# tensorboardX flushes in blocks, so a reader meets records cut anywhere, and the cut's error
# names the part it fell in ("truncated record in header crc"): a cut inside either CRC was
# once taken for a corrupt record, its point skipped and a false problem said.
@pytest.mark.parametrize(
    ("part", "into"), [("header", 3), ("header crc", 10), ("data", 14), ("data crc", -2)]
)
def test_a_record_cut_in_any_part_is_read_once_complete(tmp_path, writer_script, part, into):
    path = write(writer_script, tmp_path / "runs", "log 10")
    whole = path.read_bytes()
    start = _last_record_start(whole)
    cut = start + into if into > 0 else len(whole) + into
    path.write_bytes(whole[:cut])
    source = TensorBoardSource(tmp_path)
    rows = source.peek()
    assert steps(rows, "acc") == list(range(1, 10))  # step 10's acc is the cut record
    source.advance(len(rows))
    assert source.problems == [], part  # a writer mid-record is normal, in any part of it
    with path.open("ab") as handle:
        handle.write(whole[cut:])
    (row,) = source.peek()
    assert row["_step"] == 10 and row["acc"] == pytest.approx(0.1)
    assert source.problems == []


def test_a_record_still_cut_short_at_the_runs_last_read_is_said_then(tmp_path, writer_script):
    whole_file = write(writer_script, tmp_path / "whole", "log 3")
    junk = write(writer_script, tmp_path / "junk", "log 3")
    with junk.open("ab") as handle:
        handle.write(bytes(range(7, 250, 3)))  # garbage after the last record: said corrupt
    path = write(writer_script, tmp_path / "runs", "log 10")
    path.write_bytes(path.read_bytes()[:-5])  # as a writer that died mid-record leaves it
    source = TensorBoardSource(tmp_path, clock=Clock(), truncated_seconds=30)
    source.advance(len(source.peek()))
    (corrupt,) = source.problems  # while the run goes, a writer mid-record is normal
    assert corrupt.startswith(f"{junk.relative_to(tmp_path).as_posix()}: a corrupt record")
    source.problems.clear()

    source.finishing()  # the run has ended: no writer will complete it
    assert source.peek() == []
    (problem,) = source.problems  # the junk's end is not said again
    assert problem.startswith(f"{path.relative_to(tmp_path).as_posix()}: the last record is cut")
    source.peek()
    assert len(source.problems) == 1  # said once; the whole file says nothing
    assert whole_file.exists()


def test_a_deleted_file_is_said_once_and_the_others_read_on(tmp_path, writers, writer_script):
    gone = write(writer_script, tmp_path / "a", "log 2")
    writer = writers(tmp_path / "b")
    writer.send("log 1")
    source = TensorBoardSource(tmp_path)
    source.advance(len(read_until(source, 6)))
    gone.unlink()
    writer.send("log 1")
    rows = read_until(source, 2)
    assert logged(rows) == expected(2, 2, prefix="b/")
    assert source.problems == [f"{gone.relative_to(tmp_path).as_posix()}: deleted, no longer read"]
    source.problems.clear()
    source.peek()
    assert source.problems == []


def test_a_file_created_after_the_first_read_is_found_at_the_next_scan(tmp_path, writer_script):
    clock = Clock()
    source = TensorBoardSource(tmp_path, clock=clock, rescan_seconds=5)
    assert source.peek() == []
    write(writer_script, tmp_path / "runs", "log 3")
    assert source.peek() == []  # the tree is walked at most every rescan_seconds
    clock.now += 5
    assert steps(source.peek()) == [1, 2, 3]


def test_a_file_read_in_small_chunks_loses_nothing_even_a_record_bigger_than_one(
    tmp_path, writer_script
):
    write(writer_script, tmp_path / "runs", "log 10", "hparams", "log 2")  # hparams: ~300 bytes
    source = TensorBoardSource(tmp_path, read_chunk=64)
    rows = []
    for _ in range(100):  # 64 bytes a read: a record or two each time
        new = source.peek()
        rows += new
        source.advance(len(new))
    assert logged(rows) == expected(1, 12)
    assert source.params()["optimizer"] == "sgd"
    assert source.problems == []
