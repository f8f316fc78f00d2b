"""Issue 39's figures, each from the bench module that measures it, in a process of its own
(each starts its own embedded PostgreSQL and runagentd where it needs one):

- `stop_rule_latency_p50_ms` (goal ≤ 1,000): a metric row written by a run's script → the
  run's process group signalled by its stop rule, read when the run's files change
  (bench/stop_rule_latency.py; with the old 1 s timer and the 0.2 s stat poll beside it);
- `wake_latency_p50_ms` (≤ 200): a metric row stored → a waiter on it (wait_runs) running,
  and with 1,000 waiters on one sweep the growth of the waiting process's memory
  (`waiters_1000_rss_growth_mb`, ≤ 50) and their wake p50 (bench/wake_latency.py);
- `asha_gpu_seconds_fraction` (≤ 0.4) and `asha_best_kept_seeds` (≥ 9 of 10): ASHA on a
  synthetic 27-run sweep against the same sweep in full (bench/asha_sweep.py).

`python bench/stop_rules.py asha` (or `latency`, `wake`) runs one of them."""

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PARTS = {
    "latency": "bench.stop_rule_latency",
    "wake": "bench.wake_latency",
    "asha": "bench.asha_sweep",
}


def main() -> None:
    for part in sys.argv[1:] or list(PARTS):
        module = PARTS[part]
        code = f"import {module} as bench; bench.main()"
        subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True)


if __name__ == "__main__":
    main()
