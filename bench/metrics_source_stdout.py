"""The stdout source's reading cost: points per second that StdoutSource reads from a run.log a
real process printed (`step=N loss=X lr=Y` lines). A point is one metric value (loss, lr); the
step is not counted. Folded into bench/metrics_sources.py at merge."""

import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agentsys.metric_sources.stdout import StdoutSource

PRINTER = """
import math
for step in range(1, {lines} + 1):
    print(f"step={{step}} loss={{2.5 * math.exp(-step / 20000):.6f}} lr=3e-4", flush=True)
"""


def stdout_points_per_s(lines: int = 100_000) -> float:
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


if __name__ == "__main__":
    print(f"stdout_points_per_s: {stdout_points_per_s():.0f}")
