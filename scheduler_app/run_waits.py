"""`wait_runs` on the web's side (issue 39 §3): a wait on runs until a condition holds
(agentsys.run_waits) or its timeout, among all the waits of this process
(agentsys.run_waiters: one LISTEN connection, no connection or thread per wait).

Every read of the waits of a process (who a token is, which runs, their snapshots) runs on
one thread of its own, whose one database connection is kept while healthy: the waits hold
none of their own, and a thousand of them cost the reads one connection, not a thousand."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor

from django.db import connection, connections

from agentsys.run_waiters import RunWaiters
from agentsys.run_waits import Condition, RunState, timed_out
from common.db_outage import is_database_unavailable
from common.listen_dsn import listen_dsn
from scheduler_app.run_wait_reads import run_states, wait_targets

MAX_TIMEOUT_S = 3600.0

_reads = ThreadPoolExecutor(max_workers=1, thread_name_prefix="run-waits")
_waiters: RunWaiters | None = None


async def on_reads_thread(function, *args):
    """`function(*args)` on the waits' thread, its connection dropped after an error."""

    def call():
        try:
            return function(*args)
        except BaseException as error:
            if connection.errors_occurred or is_database_unavailable(error):
                connection.close()
            raise

    return await asyncio.get_running_loop().run_in_executor(_reads, call)


def close_reads_connection() -> None:
    """Close the waits' thread's connection (a test's database is dropped after it)."""
    _reads.submit(connections.close_all).result()


async def _snapshot(run_ids: list[str]) -> dict[str, RunState]:
    return await on_reads_thread(run_states, run_ids)


def waiters() -> RunWaiters:
    """This event loop's waits (made with the first; a new loop, as in tests, gets its own)."""
    global _waiters
    loop = asyncio.get_running_loop()
    if _waiters is None or _waiters.loop is not loop:
        _waiters = RunWaiters(listen_dsn(), _snapshot)
    return _waiters


async def wait_runs(
    *, run_ids: list[str], sweep_id: str, conditions: list[Condition], timeout_s: float
) -> dict:
    """Wait on `run_ids` (or sweep `sweep_id`'s runs) until one of `conditions` holds or
    `timeout_s` pass; the answer of POST /api/runs/wait. Raises run_wait_reads.NotFound and
    TooMany."""
    started = time.monotonic()
    targets = await on_reads_thread(lambda: wait_targets(run_ids=run_ids, sweep_id=sweep_id))
    outcome = await waiters().wait(targets, conditions, timeout_s)
    if outcome.held is not None:
        answer = outcome.held.as_data()
    else:
        reason = timed_out(conditions, timeout_s)
        answer = {"woke": False, "reason": reason, "condition": None, "run_id": None}
    answer["waited_s"] = round(time.monotonic() - started, 3)
    answer["runs"] = [run.summary() for run in outcome.runs]
    return answer
