"""runagentd's pass over old metric points (AGENTSYS_METRICS_COMPACT_AFTER_DAYS): at its first
heartbeat, then once a day, the store thins the points older than that
(scheduler_app.metrics.compaction). Every host tries; one at a time does it (an advisory lock).

A pass may take minutes, so it runs on a thread and a database connection of its own, never on
the daemon's database thread, and a stopping runagentd never waits for it: the pass checks a
flag between series (each series is thinned in a transaction of its own), and the thread is a
daemon thread, so a series being thinned as the process ends is rolled back, whole."""

from __future__ import annotations

import logging
import threading
import time

logger = logging.getLogger("agentsys.daemon")

COMPACT_EVERY_S = 86400.0  # once a day (and at the start)


class MetricCompaction:
    def __init__(self, store, older_than_days: float):
        self.store = store
        self.days = older_than_days
        self.stopping = threading.Event()
        self._last = float("-inf")  # monotonic: the first heartbeat starts one
        self._thread: threading.Thread | None = None

    def when_due(self) -> None:
        """Start a pass if one is due and none runs. Called at each heartbeat."""
        busy = self._thread is not None and self._thread.is_alive()
        if self.days <= 0 or busy or self.stopping.is_set():
            return
        if time.monotonic() - self._last < COMPACT_EVERY_S:
            return
        self._last = time.monotonic()
        self._thread = threading.Thread(target=self._pass, name="compact-metrics", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """No pass starts again, and the one running ends after the series it is on."""
        self.stopping.set()

    def _pass(self) -> None:
        try:
            said = self.store.compact_old_metrics(older_than_days=self.days, stop=self.stopping)
            logger.info("metric points older than %g days thinned: %s", self.days, said)
        except Exception:  # tried again tomorrow
            logger.exception("could not thin old metric points")
