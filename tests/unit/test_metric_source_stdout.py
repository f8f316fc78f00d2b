"""StdoutSource reads metrics from what real processes print into a run's run.log."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import textwrap
import time
import tracemalloc
from pathlib import Path

import pytest

from agentsys.metric_sources.stdout import (
    BLOCK_SIZE,
    LINE_CAP,
    MAX_PATTERN_TIMEOUTS,
    StdoutSource,
    compile_pattern,
)

DEMO_PRINTS = (
    Path(__file__).resolve().parents[2] / "researchagent" / "demo_workspace" / "train_prints.py"
)


def printed(log: Path, code: str) -> None:
    """Run `code` in a real Python process whose stdout and stderr go to the end of `log`, as
    the executor's wrapper sends a run's output."""
    with log.open("ab") as out:
        subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)],
            stdout=out,
            stderr=out,
            check=True,
            timeout=60,
        )


def print_lines(log: Path, *lines: str, to_stderr: bool = False) -> None:
    stream = "sys.stderr" if to_stderr else "sys.stdout"
    printed(log, f"import sys\nfor line in {list(lines)!r}:\n    print(line, file={stream})")


def retry_marker(log: Path, attempt: int) -> None:
    # What agentsys.agents.executor writes before a retry's own output (its _start_process).
    with log.open("ab") as out:
        out.write(f"\n--- retry {attempt} ---\n".encode())


@pytest.fixture
def log(tmp_path) -> Path:
    return tmp_path / "run.log"


@pytest.mark.parametrize(
    ("line", "row"),
    [
        ("step=100 loss=2.31 lr=3e-4", {"_step": 100, "loss": 2.31, "lr": 3e-4}),
        ("step=100, loss=2.31, lr=3e-4", {"_step": 100, "loss": 2.31, "lr": 3e-4}),
        ("global_step=7 loss=-0.5 acc=1E2", {"_step": 7, "loss": -0.5, "acc": 100.0}),
        ("Epoch: 3, loss: 0.52", {"epoch": 3, "loss": 0.52}),
        ("Train Epoch: 1 [0/60000 (0%)]\tLoss: 2.302585", {"epoch": 1, "loss": 2.302585}),
        ("step 100 | loss 2.31 | lr 0.001", {"_step": 100, "loss": 2.31, "lr": 0.001}),
        ("iter 7: loss 3.2 val_acc 0.91", {"_step": 7, "loss": 3.2, "val_acc": 0.91}),
        ("iteration=12 reward=nan", {"_step": 12, "reward": math.nan}),
        ("loss=inf grad_norm=-Inf", {"loss": math.inf, "grad_norm": -math.inf}),
        ("loss = 0.25, acc = 0.5", {"loss": 0.25, "acc": 0.5}),
        ("epoch 2 perplexity 14.5", {"epoch": 2, "perplexity": 14.5}),
        (
            "{'loss': 2.3, 'grad_norm': 1.5, 'learning_rate': 5e-05, 'epoch': 0.1}",
            {"loss": 2.3, "grad_norm": 1.5, "learning_rate": 5e-05, "epoch": 0.1},
        ),
        (
            "{'eval_loss': nan, 'eval_runtime': 0.5, 'epoch': 1.0, 'note': 'x'}",
            {"eval_loss": math.nan, "eval_runtime": 0.5, "epoch": 1.0},
        ),
        ("{'loss': '0.6931', 'step': 4}", {"_step": 4, "loss": 0.6931}),
        (" 10%|#    | 10/100 [00:01<00:09, loss=2.31]", {"loss": 2.31}),
    ],
)
def test_each_line_shape_is_read(log, line, row):
    print_lines(log, line)

    rows = StdoutSource(log).peek()

    # A line with no step of its own is counted among such lines: the first is step 0.
    row = row if "_step" in row else {**row, "_step": 0}
    assert len(rows) == 1
    assert rows[0].keys() == row.keys()
    for key, value in row.items():
        got = rows[0][key]
        assert type(got) is type(value), key
        assert (math.isnan(got) and math.isnan(value)) or got == value, key


def test_lines_that_are_not_metrics_are_ignored_silently(log):
    print_lines(
        log,
        "Loading 3 files",
        "Error: 3 files missing",
        "Saved checkpoint to out/ckpt-100.pt",
        "time=3s",
        "date=2024-01-05 at=12:30 version=2.1.0 host=10.0.0.1",
        "torch: 2.1.0",
        "12:30:45 starting",
        "http://localhost:8080/x",
        "step 5",  # a step and no metric
        "{'name': 'resnet', 'layers': [1, 2]}",
        "step=1.5 done",
        # Hugging Face Trainer's banner: settings named in words, counts with separators.
        "  Num examples = 1,000",
        "  Total optimization steps = 100",
        "  Number of trainable parameters = 124,439,808",
        "",
    )
    source = StdoutSource(log)

    assert source.peek() == []
    assert source.problems == []


def test_stderr_is_read(log):
    print_lines(log, "loss=0.5", to_stderr=True)

    assert StdoutSource(log).peek() == [{"loss": 0.5, "_step": 0}]


def test_reads_only_what_is_new_and_only_whole_lines(log):
    source = StdoutSource(log)
    assert source.peek() == []  # no run.log yet

    print_lines(log, "step=1 loss=3", "step=2 loss=2")
    assert [row["_step"] for row in source.peek()] == [1, 2]
    source.advance(2)

    printed(log, "import sys; sys.stdout.write('step=3 loss=1\\nstep=4 lo'); sys.stdout.flush()")
    assert source.peek() == [{"_step": 3, "loss": 1}]  # step 4 is still being written
    source.advance(1)
    assert source.peek() == []

    printed(log, "print('ss=0.5')")
    assert source.peek() == [{"_step": 4, "loss": 0.5}]


def test_peek_repeats_its_rows_until_they_are_advanced_past(log):
    print_lines(log, "step=1 loss=3", "hello", "step=2 loss=2", "step=3 loss=1")
    source = StdoutSource(log)

    first = source.peek()
    assert source.peek() == first  # not stored: returned again
    source.advance(1)
    print_lines(log, "step=4 loss=0.5")

    assert [row["_step"] for row in source.peek()] == [2, 3, 4]
    source.advance(0)
    assert [row["_step"] for row in source.peek()] == [2, 3, 4]


def test_position_resumes_a_new_source_after_the_stored_rows_only(log):
    print_lines(log, "step=1 loss=3", "step=2 loss=2", "step=3 loss=1")
    source = StdoutSource(log)
    source.peek()
    source.advance(1)
    position = source.position()
    assert position == {
        "offset": len(b"step=1 loss=3\n"),
        "inode": os.stat(log).st_ino,
        "stepless": 0,
    }

    again = StdoutSource(log)
    again.resume(position)
    assert [row["_step"] for row in again.peek()] == [2, 3]

    again.advance(2)
    print_lines(log, "nothing here")
    assert again.position()["offset"] == len(b"step=1 loss=3\nstep=2 loss=2\nstep=3 loss=1\n")
    assert again.peek() == []


def test_a_replaced_or_truncated_log_is_read_from_its_start(log):
    print_lines(log, "step=1 loss=3", "step=2 loss=2")
    source = StdoutSource(log)
    source.advance(len(source.peek()))

    log.unlink()
    print_lines(log, "step=1 loss=9")  # a new file: a new inode
    assert source.peek() == [{"_step": 1, "loss": 9}]
    source.advance(1)

    with log.open("wb"):  # truncated in place
        pass
    print_lines(log, "a=1")
    assert source.peek() == [{"a": 1, "_step": 0}]


def test_a_bad_saved_position_is_not_an_error(log):
    print_lines(log, "loss=1")
    source = StdoutSource(log)
    source.resume({"offset": "x", "inode": [1], "stepless": -3})

    assert source.peek() == [{"loss": 1, "_step": 0}]


def test_the_retry_marker_is_skipped(log):
    # A pattern that would take the marker's number for a loss, were the marker not skipped.
    source = StdoutSource(log, pattern=r"(?P<loss>\d+(?:\.\d+)?)")
    printed(log, "import sys; print('0.5'); sys.stdout.write('0.2'); sys.stdout.flush()")
    retry_marker(log, 1)
    print_lines(log, "0.25")

    rows = [{"loss": 0.5, "_step": 0}, {"loss": 0.2, "_step": 1}, {"loss": 0.25, "_step": 2}]
    assert source.peek() == rows


def test_a_metrics_pattern_reads_its_named_groups(log):
    pattern = r"it (?P<step>\d+) -> cost (?P<cost>\S+) \((?P<phase>\w+)\)"
    print_lines(log, "it 5 -> cost 1.5e-2 (warmup)", "it 6 -> cost 0.01 (main)", "loss=2")
    source = StdoutSource(log, pattern=pattern)

    # Lines the pattern does not match are read by the common shapes.
    rows = [{"_step": 5, "cost": 0.015}, {"_step": 6, "cost": 0.01}, {"loss": 2, "_step": 0}]
    assert source.peek() == rows
    assert source.problems == []


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        ("(?P<loss>[0-9.]+", "metrics_pattern does not compile: missing )"),
        ("loss=(?P<loss>[0-9.]+", "metrics_pattern does not compile"),
        (r"loss=(\S+)", "metrics_pattern has no named group"),
        ("   ", "metrics_pattern is empty"),
        ("x" * 3000, "metrics_pattern is 3000 characters"),
    ],
)
def test_a_bad_pattern_says_why(pattern, reason):
    with pytest.raises(ValueError, match=reason.replace("(", r"\(").replace(")", r"\)")):
        compile_pattern(pattern)


def test_a_source_given_a_bad_pattern_says_so_and_reads_the_common_shapes(log):
    print_lines(log, "loss=1")
    source = StdoutSource(log, pattern="(")

    assert source.peek() == [{"loss": 1, "_step": 0}]
    assert len(source.problems) == 1
    assert source.problems[0].startswith("metrics_pattern does not compile")


def test_a_backtracking_pattern_times_out_per_line_and_is_said_once(log):
    print_lines(log, *["a" * 40 + "b"] * 3, "step=1 loss=0.5", "a" * 40 + "b")
    source = StdoutSource(log, pattern=r"(?P<loss>(a|aa)+)$")

    started = time.monotonic()
    rows = source.peek()

    assert time.monotonic() - started < 5
    assert rows == [{"_step": 1, "loss": 0.5}]
    assert len(source.problems) == 1
    assert source.problems[0].startswith("metrics_pattern timed out on a line: 'aaaa")
    assert source.pattern is not None  # 4 lines: not yet given up on


def test_a_pattern_that_keeps_timing_out_is_dropped(log):
    print_lines(log, *["a" * 40 + "b"] * (MAX_PATTERN_TIMEOUTS + 5), "loss=0.5")
    source = StdoutSource(log, pattern=r"(?P<loss>(a|aa)+)$")

    started = time.monotonic()
    assert source.peek() == [{"loss": 0.5, "_step": 0}]

    # 20 lines of 50 ms, not 25: the rest were read without the pattern.
    assert time.monotonic() - started < 10
    assert source.pattern is None
    assert len(source.problems) == 2
    assert "timed out on 20 lines" in source.problems[1]


def test_the_classic_nested_quantifier_does_not_hang(log):
    # `(a+)+$` takes 2**40 steps in Python's re; the regex package's search does not hang.
    print_lines(log, "a" * 40 + "b", "step=1 loss=0.5")
    source = StdoutSource(log, pattern=r"(?P<run>(a+)+)$")

    started = time.monotonic()
    assert source.peek() == [{"_step": 1, "loss": 0.5}]
    assert time.monotonic() - started < 5


def test_a_huge_line_without_newline_is_skipped_in_bounded_memory(log):
    size = 20_000_000
    printed(log, f"import sys; print('step=1 loss=2'); sys.stdout.write('x' * {size})")
    source = StdoutSource(log)

    tracemalloc.start()
    try:
        assert source.peek() == [{"_step": 1, "loss": 2}]
        assert source.peek() == [{"_step": 1, "loss": 2}]  # scanned on, not read again whole
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert source.largest_read <= LINE_CAP + BLOCK_SIZE
    assert peak < 4 * (LINE_CAP + BLOCK_SIZE)  # far from the 20 MB line
    assert len(source.problems) == 1
    assert source.problems[0].startswith("run.log: skipped a line longer than 64 KiB at byte 14")
    source.advance(1)
    assert source.position()["offset"] == len(b"step=1 loss=2\n")  # before the unended line

    printed(log, f"print(); print('y' * {size}); print('step=2 loss=1')")  # ends it; one more
    assert source.peek() == [{"_step": 2, "loss": 1}]
    assert len(source.problems) == 1  # said once
    source.advance(1)
    assert source.position()["offset"] == os.stat(log).st_size

    again = StdoutSource(log)  # a re-adopted run skips the long lines too
    assert [row["_step"] for row in again.peek()] == [1, 2]
    assert again.largest_read <= LINE_CAP + BLOCK_SIZE


def test_a_long_line_ending_in_one_read_is_skipped_too(log):
    printed(log, f"print('loss=1' + ' ' * {LINE_CAP}); print('loss=2')")
    source = StdoutSource(log)

    assert source.peek() == [{"loss": 2, "_step": 0}]
    assert len(source.problems) == 1


def test_the_demo_script_that_only_prints_is_charted(log):
    with log.open("ab") as out:
        subprocess.run(
            [sys.executable, str(DEMO_PRINTS), "--steps=30", "--sleep=0", "--lr=0.05"],
            stdout=out,
            stderr=out,
            check=True,
            timeout=60,
        )
    rows = StdoutSource(log).peek()

    assert [row["_step"] for row in rows[:3]] == [10, 20, 30]
    assert all(row.keys() == {"_step", "loss", "lr"} and row["lr"] == 0.05 for row in rows[:3])
    assert rows[0]["loss"] > rows[2]["loss"] > 0
    # Its last line, `done: w=… b=…`: the first line with no step of its own, step 0.
    assert [(set(row), row["_step"]) for row in rows[3:]] == [({"w", "b", "_step"}, 0)]


def test_echoed_environment_variables_are_not_metrics():
    from agentsys.metric_sources.stdout import parse_common

    assert parse_common("CUDA_VISIBLE_DEVICES=0 RANK=1") is None
    assert parse_common("CVD=0") is None
    assert parse_common("Loss=0.5 LR=0.1") == {"loss": 0.5}


# What a Hugging Face Trainer run prints with logging_steps=20 over 100 steps (a tqdm bar
# redrawn with \r, one dict per logging step with no step in it, an eval dict, the summary).
TRAINER_LOG = [
    "***** Running training *****",
    "  Num examples = 1,000",
    "  Total optimization steps = 100",
    "\r  0%|          | 0/100 [00:00<?, ?it/s]\r 20%|##        | 20/100 [00:01<00:04, 19.2it/s]",
    "{'loss': 0.6931, 'grad_norm': 1.25, 'learning_rate': 0.0001, 'epoch': 0.5}",
    "\r 40%|####      | 40/100 [00:02<00:03, 19.4it/s]",
    "{'loss': 0.52, 'grad_norm': 0.98, 'learning_rate': 8e-05, 'epoch': 1.0}",
    "{'eval_loss': 0.55, 'eval_runtime': 0.31, 'eval_samples_per_second': 322.6, 'epoch': 1.0}",
    "{'loss': 0.44, 'grad_norm': 0.91, 'learning_rate': 6e-05, 'epoch': 1.5}",
    "{'loss': 0.41, 'grad_norm': 0.85, 'learning_rate': 4e-05, 'epoch': 2.0}",
    "{'loss': 0.39, 'grad_norm': 0.8, 'learning_rate': 2e-05, 'epoch': 2.5}",
    "{'train_runtime': 5.1, 'train_samples_per_second': 19.6, 'train_loss': 0.49, 'epoch': 2.5}",
]


def test_every_key_of_a_trainer_line_shares_one_step_counted_over_such_lines(log):
    print_lines(log, *TRAINER_LOG)
    source = StdoutSource(log)

    rows = source.peek()

    assert [row["_step"] for row in rows] == [0, 1, 2, 3, 4, 5, 6]
    assert [row.get("loss") for row in rows] == [0.6931, 0.52, None, 0.44, 0.41, 0.39, None]
    assert rows[2]["eval_loss"] == 0.55 and rows[2]["epoch"] == 1.0
    assert rows[0].keys() == {"_step", "loss", "grad_norm", "learning_rate", "epoch"}

    # Stored up to the eval line, then a new source (a re-adopted run) counts on from there.
    source.advance(3)
    again = StdoutSource(log)
    again.resume(source.position())
    assert [row["_step"] for row in again.peek()] == [3, 4, 5, 6]


def test_lines_with_their_own_step_keep_it_and_the_others_are_counted_apart(log):
    print_lines(log, "step=20 loss=0.7", "{'lr': 0.1, 'epoch': 1}", "step=40 loss=0.6", "acc=0.9")

    rows = StdoutSource(log).peek()

    assert [row["_step"] for row in rows] == [20, 0, 40, 1]
