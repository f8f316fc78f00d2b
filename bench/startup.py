"""Start-up costs of the foundation: embedded PostgreSQL cold/warm/attach, and a whole
`manage.py check` process (what every command and the daemon pay before doing anything)."""

import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._report import percentile, report
from researchagent.embedded_db import EmbeddedPostgres

REPO = Path(__file__).resolve().parent.parent


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) * 1000


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="agentsys-bench-") as tmp:
        server = EmbeddedPostgres(Path(tmp) / "home")
        report("embedded_pg_cold_start_ms", timed(server.acquire), "ms")  # initdb + start
        report("embedded_pg_attach_ms", timed(EmbeddedPostgres(server.home).acquire), "ms")
        server.release()
        warm = []
        for _ in range(3):
            fresh = EmbeddedPostgres(server.home)
            warm.append(timed(fresh.acquire))  # existing data dir, server stopped
            fresh.release()
        report("embedded_pg_warm_start_ms", min(warm), "ms")

        env = {"AGENTSYS_HOME": str(Path(tmp) / "home"), "PATH": "/usr/bin:/bin"}
        runs = [
            timed(
                lambda: subprocess.run(
                    [sys.executable, "manage.py", "check"],
                    cwd=REPO,
                    env=env,
                    check=True,
                    capture_output=True,
                )
            )
            for _ in range(5)
        ]
        report("manage_check_p50_ms", percentile(runs, 50), "ms")


if __name__ == "__main__":
    main()
