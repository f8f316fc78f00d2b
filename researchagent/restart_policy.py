"""When `serve` restarts a child that exited, and when it gives up."""

from __future__ import annotations

import signal
from dataclasses import dataclass


def exit_cause(returncode: int) -> str:
    """`exit code 1`, or `signal SIGKILL` for a child killed by a signal."""
    if returncode < 0:
        try:
            return f"signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"signal {-returncode}"
    return f"exit code {returncode}"


@dataclass
class RestartPolicy:
    """Exponential backoff over consecutive fast crashes. A child that ran at least
    `fast_seconds` before it exited was working: its next restart is quick again."""

    max_fast_crashes: int = 5
    fast_seconds: float = 30.0
    first_delay: float = 0.5
    max_delay: float = 30.0
    fast_crashes: int = 0

    def after_exit(self, ran_for: float) -> float | None:
        """Seconds to wait before the restart, or None: give up."""
        if ran_for >= self.fast_seconds:
            self.fast_crashes = 0
            return self.first_delay
        self.fast_crashes += 1
        if self.fast_crashes >= self.max_fast_crashes:
            return None
        return min(self.max_delay, self.first_delay * 2 ** (self.fast_crashes - 1))
