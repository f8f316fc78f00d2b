"""Reading cost of each metric source (issue 20): points per second read through the source
from a real file of 200,000 points its usual logger wrote. One function per source; the goal
is at least 50,000 points/s for TensorBoard and for printed lines."""

import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tensorboardX import SummaryWriter

from agentsys.metric_sources.stdout import StdoutSource
from agentsys.metric_sources.tensorboard import TensorBoardSource
from bench._report import report

POINTS = 200_000
TRIES = 3  # the best of: the machine is shared, the slowest tries measure the neighbours


def tensorboard_points_per_s() -> float:
    """tensorboardX's SummaryWriter logs loss and lr at 100,000 steps (one record a point, as
    it writes them); a fresh TensorBoardSource finds the file and reads it all."""
    with tempfile.TemporaryDirectory(prefix="agentsys-bench-tb-") as tmp:
        with SummaryWriter(str(Path(tmp) / "runs" / "bench"), max_queue=1000) as writer:
            for step in range(POINTS // 2):
                writer.add_scalar("loss", 1.0 / (step + 1), step)
                writer.add_scalar("lr", 0.05, step)
        best = 0.0
        for _ in range(TRIES):
            source = TensorBoardSource(Path(tmp))
            started = time.perf_counter()
            rows = source.peek()
            source.advance(len(rows))
            elapsed = time.perf_counter() - started
            read = sum(len(row) - 2 for row in rows)  # all but _step and _timestamp
            if read != POINTS or source.problems:
                raise SystemExit(f"tensorboard: read {read} of {POINTS} points, {source.problems}")
            best = max(best, read / elapsed)
        return best


PRINTER = """
import math
for step in range(1, {lines} + 1):
    print(f"step={{step}} loss={{2.5 * math.exp(-step / 20000):.6f}} lr=3e-4", flush=True)
"""


def stdout_points_per_s(lines: int = POINTS // 2) -> float:
    """A real process prints `step=N loss=X lr=Y` lines into a run.log; a fresh StdoutSource
    reads them all (a point is one value: loss or lr)."""
    with tempfile.TemporaryDirectory() as workdir:
        log = Path(workdir) / "run.log"
        with log.open("ab") as out:
            subprocess.run(
                [sys.executable, "-c", PRINTER.format(lines=lines)], stdout=out, check=True
            )
        source = StdoutSource(log)
        started = time.perf_counter()
        rows = source.peek()
        source.advance(len(rows))
        elapsed = time.perf_counter() - started
    points = sum(len(row) - ("_step" in row) for row in rows)
    if points != 2 * lines:
        raise RuntimeError(f"read {points} points, expected {2 * lines}")
    return points / elapsed


def main() -> None:
    report("tensorboard_points_per_s", tensorboard_points_per_s(), "points/s")
    report("stdout_points_per_s", stdout_points_per_s(), "points/s")


if __name__ == "__main__":
    main()
