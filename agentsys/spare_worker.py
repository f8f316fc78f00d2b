"""A worker process started before it is needed, so that an agent's start does not wait for a
fork (issue 25: ~25 ms of every worker agent's start, more on a busy host).

The spare is forked from the forkserver like any worker, makes itself a session leader, and
waits on its pipe for the WorkerSpec of the agent it will run (agentsys.worker.run_spare).
Taking it hands over the process and its pipe, and starts the next spare in the background;
when none is ready (a burst of starts), a new one is started on the spot. A spare whose
runagentd goes away reads EOF and exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from multiprocessing.connection import Connection

from agentsys.worker import run_spare

logger = logging.getLogger("agentsys.supervisor")

REFILL_DELAY_SECONDS = 0.05
Started = tuple  # (multiprocessing Process, Connection: runagentd's end of its pipe)


class SpareWorker:
    def __init__(self, mp_context):
        self.mp = mp_context
        self._ready: Started | None = None
        self._making: asyncio.Task | None = None
        self._closed = False

    async def take(self) -> Started:
        """A started worker waiting for its spec: the spare when one is ready."""
        spare, self._ready = self._ready, None
        if spare is None or not spare[0].is_alive():
            if spare is not None:
                _discard(spare)
            spare = await self._start()
        # The next one a moment later: its fork would compete with this worker's start.
        asyncio.get_running_loop().call_later(REFILL_DELAY_SECONDS, self.refill)
        return spare

    def refill(self) -> None:
        """Start the next spare in the background, unless one is ready or on its way."""
        if self._closed or self._ready is not None or self._making is not None:
            return
        self._making = asyncio.create_task(self._make(), name="spare-worker")

    async def _make(self) -> None:
        try:
            started = await self._start()
        except Exception:  # the next take starts one on the spot
            if not self._closed:  # stopping: its forkserver was stopped under it
                logger.exception("could not start a spare worker")
            return
        finally:
            self._making = None
        if self._closed:
            _discard(started)
        else:
            self._ready = started

    async def _start(self) -> Started:
        parent_end, child_end = self.mp.Pipe(duplex=True)
        process = self.mp.Process(target=run_spare, args=(child_end,), name="agentsys-worker")
        await asyncio.get_running_loop().run_in_executor(None, process.start)
        child_end.close()
        return process, parent_end

    async def close(self) -> None:
        """runagentd is stopping: the spare exits (one on its way, once started: it is not
        waited for, and ends at the latest with runagentd, when its pipe reaches EOF)."""
        self._closed = True
        if self._ready is not None:
            spare, self._ready = self._ready, None
            _discard(spare)
            await asyncio.get_running_loop().run_in_executor(None, spare[0].join, 2.0)
            if spare[0].is_alive():
                spare[0].kill()


def _discard(spare: Started) -> None:
    conn: Connection = spare[1]
    with contextlib.suppress(OSError):
        conn.close()  # EOF: it exits
