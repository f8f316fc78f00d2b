"""Everyone waiting on runs in one process (issue 39 §3), woken by one LISTEN connection.

A waiter is a future in a map keyed by the runs it watches: it holds no database connection
and no thread while it waits. The apps send `NOTIFY agentsys_runs, '<run id>'` in the
transaction that stores a run's metrics, moves its status or raises its alert (delivered at
commit). On one, the waiters of that run are judged again (agentsys.run_waits) against one
snapshot of all their runs: one read per wake, however many waiters it wakes, and news that
comes while a read is under way is read together in the next one.

A run whose news is missed (the LISTEN connection reconnecting, a status written by a path
that sends none) is still seen: every waiter is judged again every RECHECK_S seconds, in one
read, while there are any; and after each (re)connect.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from agentsys.listen import DB_RETRY_FIRST, DB_RETRY_MAX
from agentsys.run_waits import Condition, Held, RunState, first_held

logger = logging.getLogger("agentsys.run_waits")

RUNS_CHANNEL = "agentsys_runs"  # payload: the id of a run whose metrics, status or alerts moved
RECHECK_S = 5.0

# Reads the runs named (those that exist) in one go; runs in no thread of the caller's.
Snapshot = Callable[[list[str]], Awaitable[dict[str, RunState]]]


@dataclass(eq=False)
class _Waiter:
    run_ids: list[str]
    conditions: list[Condition]
    since: float
    woken: asyncio.Future = field(repr=False)


@dataclass
class Outcome:
    """How a wait ended: the condition that held (None: the timeout came first), and the
    runs as the last read saw them."""

    held: Held | None
    runs: list[RunState]


class RunWaiters:
    """The waiters of one event loop, and its one LISTEN connection (started with the first
    waiter, kept for the next ones). `dsn`: libpq conninfo (None: no LISTEN, the recheck
    alone)."""

    def __init__(self, dsn: str | None, snapshot: Snapshot, *, recheck_s: float = RECHECK_S):
        self.loop = asyncio.get_running_loop()
        self._dsn, self._snapshot, self._recheck_s = dsn, snapshot, recheck_s
        self._by_run: dict[str, set[_Waiter]] = {}
        self._news: set[str] = set()
        self._reading: asyncio.Task | None = None
        self._listening: asyncio.Task | None = None
        self.reads = 0  # snapshots read for waiters already waiting (the bench counts them)

    @property
    def waiting(self) -> int:
        return len({w for waiters in self._by_run.values() for w in waiters})

    async def wait(
        self,
        run_ids: list[str],
        conditions: list[Condition],
        timeout_s: float,
        *,
        since: float | None = None,
    ) -> Outcome:
        """Until one of `conditions` holds over `run_ids` (at once when one does now), or
        `timeout_s` pass. `since` (seconds since the epoch; default now): alerts raised
        before it do not count."""
        started = time.time() if since is None else since
        waiter = _Waiter(list(run_ids), conditions, started, self.loop.create_future())
        # Registered before the first read: news that comes during it is read again after.
        for run_id in waiter.run_ids:
            self._by_run.setdefault(run_id, set()).add(waiter)
        self._start()
        try:
            runs = await self._read(waiter.run_ids)
            held = first_held(conditions, runs, waiter.since)
            if held is not None:
                return Outcome(held, runs)
            try:
                async with asyncio.timeout(timeout_s):
                    return await waiter.woken
            except TimeoutError:
                return Outcome(None, await self._read(waiter.run_ids))
        finally:
            self._forget(waiter)

    async def _read(self, run_ids: list[str]) -> list[RunState]:
        found = await self._snapshot(run_ids)
        return [found.get(run_id) or RunState(run_id, status="gone") for run_id in run_ids]

    def _forget(self, waiter: _Waiter) -> None:
        for run_id in waiter.run_ids:
            waiters = self._by_run.get(run_id)
            if waiters is not None:
                waiters.discard(waiter)
                if not waiters:
                    del self._by_run[run_id]

    def heard(self, run_id: str | None) -> None:
        """News of `run_id` (None: of any run, as after a reconnect): its waiters are judged
        again, together with any other news that comes before the read."""
        if run_id is None:
            self._news.update(self._by_run)
        elif run_id in self._by_run:
            self._news.add(run_id)
        else:
            return
        if self._reading is None or self._reading.done():
            self._reading = self.loop.create_task(self._judge_news())

    async def _judge_news(self) -> None:
        while self._news:
            news, self._news = self._news, set()
            waiters = {w for run_id in news for w in self._by_run.get(run_id, ())}
            waiters = {w for w in waiters if not w.woken.done()}
            if not waiters:
                continue
            wanted = sorted({run_id for w in waiters for run_id in w.run_ids})
            try:
                found = await self._snapshot(wanted)
            except Exception as error:  # the recheck tries again; the waiters wait on
                logger.warning(
                    "judging run waiters failed (%s); retried in %g s", error, self._recheck_s
                )
                continue
            self.reads += 1
            for waiter in waiters:
                runs = [found.get(r) or RunState(r, status="gone") for r in waiter.run_ids]
                held = first_held(waiter.conditions, runs, waiter.since)
                if held is not None and not waiter.woken.done():
                    waiter.woken.set_result(Outcome(held, runs))

    def _start(self) -> None:
        if self._listening is None or self._listening.done():
            self._listening = self.loop.create_task(self._listen_and_recheck())

    async def _listen_and_recheck(self) -> None:
        recheck = self.loop.create_task(self._recheck())
        try:
            await listen_for_runs(self._dsn, self.heard)
        finally:
            recheck.cancel()

    async def _recheck(self) -> None:
        while True:
            await asyncio.sleep(self._recheck_s)
            if self._by_run:
                self.heard(None)


async def listen_for_runs(dsn: str | None, heard: Callable[[str | None], None]) -> None:
    """Tell `heard` each run id NOTIFY names on RUNS_CHANNEL, and None after each (re)connect
    (news may have been missed meanwhile); reconnect with backoff, until cancelled. No dsn:
    wait until cancelled (the recheck alone)."""
    if not dsn:
        await asyncio.Event().wait()
    import psycopg

    delay, lost = DB_RETRY_FIRST, False
    while True:
        try:
            async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
                await conn.execute(f"LISTEN {RUNS_CHANNEL}")
                if lost:
                    logger.info("run waiters' LISTEN connection back")
                delay, lost = DB_RETRY_FIRST, False
                heard(None)
                async for notification in conn.notifies():
                    heard(notification.payload or None)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            if not lost:
                gist = (str(error).strip().splitlines() or [type(error).__name__])[0]
                logger.warning("run waiters' LISTEN connection lost (%s); reconnecting", gist)
            lost = True
            await asyncio.sleep(delay)
            delay = min(delay * 2, DB_RETRY_MAX)
