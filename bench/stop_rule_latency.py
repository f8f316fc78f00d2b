"""How soon a stop rule stops its run (issue 39): from the row a script writes that meets
`{"metric": "loss", "above": 2.0}` to the run's processes getting their SIGTERM, through a
real runagentd, over RUNS runs (GROUP at a time). Each script writes a few fine rows, waits a
random part of the timer's 3 s (so its row lands anywhere between two timed looks), notes the
time it writes the row that meets the rule, and its SIGTERM handler notes when the stop came.

Printed: stop_rule_latency_p50_ms and _p90_ms with the executor looking on change through
inotify (goal: p50 <= 1,000 ms on this 2-core machine); stop_rule_latency_poll_p50_ms and _p90_ms
with the fallback a network filesystem gets (AGENTSYS_METRICS_WATCH=poll: a stat of the files
every 0.2 s); stop_rule_latency_timer_p50_ms and _p90_ms forced back onto the timer
(AGENTSYS_METRICS_WATCH=timer: a look a second, as before issue 39). Run by
`python bench/stop_rules.py latency`. Each run's two instants are its StopPoints
(tests/integration/test_bench_stop_rule_points.py checks they are these)."""

import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._report import percentile, report
from bench.harness import BenchSystem

RUNS = 12
GROUP = 4  # runs going at once: a loaded host, not one run alone on it
RULE = {"metric": "loss", "above": 2.0}
SCRIPT = """
import json, os, signal, sys, time
run_dir = os.environ["AGENTSYS_RUN_DIR"]

def stopped(*_):
    with open(os.path.join(run_dir, "sigterm.txt"), "w") as out:
        out.write(repr(time.time()))
    sys.exit(0)

signal.signal(signal.SIGTERM, stopped)
with open(os.path.join(run_dir, "agent_metrics.jsonl"), "a", buffering=1) as out:
    for step in range(10):
        out.write(json.dumps({"_step": step, "loss": 0.5}) + "\\n")
        time.sleep(0.05)
    time.sleep(1.0 + float(sys.argv[1]))
    written = time.time()
    out.write(json.dumps({"_step": 10, "loss": 3.0}) + "\\n")
with open(os.path.join(run_dir, "written.txt"), "w") as note:
    note.write(repr(written))
time.sleep(120)
"""


@dataclass(frozen=True)
class StopPoints:
    """One run's two instants, each noted by its own script (time.time())."""

    agent_id: str
    written: float  # just before it wrote the row that meets the rule
    signalled: float  # in its SIGTERM handler: the stop reached its process


def stop_rule_latency_ms(points: StopPoints) -> float:
    return (points.signalled - points.written) * 1000


def latencies(system: BenchSystem, mode: str) -> list[float]:
    """ms from the row written to SIGTERM, one a run, with runagentd watching as `mode`."""
    watch = "" if mode == "change" else mode
    daemon = system.start_daemon(f"stop-{mode}", AGENTSYS_METRICS_WATCH=watch)
    try:
        points = stop_points(Path(system.env["AGENTSYS_WORKDIR"]))
    finally:
        system.stop_process(daemon)
    return [stop_rule_latency_ms(run) for run in points]


def stop_points(
    workdir: Path, runs: int = RUNS, group: int = GROUP, spread: float = 3.0
) -> list[StopPoints]:
    """`runs` runs of the script in `workdir`, `group` at a time, each waiting a random part
    of `spread` seconds before its row that meets the rule, on the runagentd running now."""
    from scheduler_app.models import Run, RunStatus
    from scheduler_app.runs import launch

    (workdir / "diverges.py").write_text(SCRIPT)
    samples: list[StopPoints] = []
    for _ in range(runs // group):
        made = [
            launch.create_run(
                name="stop-bench",
                command=f"{sys.executable} diverges.py {random.uniform(0, spread):.3f}",
                workdir=str(workdir),
                gpu_required=0,
                auto_start=True,
                executor_options={"stop_when": [RULE]},
            )
            for _ in range(group)
        ]
        for run in made:
            ended = _ended(Run, RunStatus, run)
            if ended.status != RunStatus.STOPPED or not ended.stopped_by:
                raise SystemExit(f"{run.id} ended {ended.status}, not by its rule")
            run_dir = workdir / ".agents" / "runs" / run.agent_id
            written = float((run_dir / "written.txt").read_text())
            signalled = float((run_dir / "sigterm.txt").read_text())
            samples.append(StopPoints(run.agent_id, written, signalled))
    return samples


def _ended(Run, RunStatus, run, timeout: float = 60.0):
    live = set(RunStatus.open())
    deadline = time.monotonic() + timeout
    while (current := Run.objects.get(pk=run.pk)).status in live:
        if time.monotonic() > deadline:
            raise SystemExit(f"{run.id} did not end within {timeout:.0f} s")
        time.sleep(0.05)
    return current


def main() -> None:
    modes = sys.argv[1:] or ["change", "poll", "timer"]
    system = BenchSystem()
    try:
        for mode in modes:
            samples = latencies(system, mode)
            name = "stop_rule_latency" if mode == "change" else f"stop_rule_latency_{mode}"
            print(f"{mode}: {sorted(round(s) for s in samples)}", file=sys.stderr)
            report(f"{name}_p50_ms", percentile(samples, 50), "ms")
            report(f"{name}_p90_ms", percentile(samples, 90), "ms")
    finally:
        system.close()
