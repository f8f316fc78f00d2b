"""runagentd stops within 5 s even while its forkserver is still importing Django (a busy
host): the spare worker on its way waits in a thread on the forkserver, and asyncio.run
waits for that thread at exit unless the forkserver is stopped (agentsys.forkserver).
CI found it: 5.2 s for a SIGTERM'd runagentd on a loaded machine."""

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# The spare worker's start meets a forkserver whose preload takes 30 s.
SLOW_PRELOAD = "tests.unit.slow_import"

DAEMON_END = textwrap.dedent(
    f"""
    import asyncio, time
    from agentsys import forkserver
    from agentsys.spare_worker import SpareWorker

    async def main():
        context, _ = forkserver.start(({SLOW_PRELOAD!r},))
        spare = SpareWorker(context)
        spare.refill()
        await asyncio.sleep(0.5)  # its start waits on the forkserver's preload
        await spare.close()
        forkserver.stop()

    started = time.monotonic()
    asyncio.run(main())
    print(round(time.monotonic() - started, 2))
    """
)


def test_a_spare_on_its_way_does_not_hold_the_daemons_end():
    done = subprocess.run(
        [sys.executable, "-c", DAEMON_END], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    took = float(done.stdout.strip().splitlines()[-1])
    assert took < 5, f"the end waited {took} s on the forkserver"
