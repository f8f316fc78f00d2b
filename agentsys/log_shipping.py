"""Shipping a run's log to the database, for a web that cannot read the disk it is on.

The host that runs a command ships what the command writes to `run.log` (agentsys.run_dir)
into PostgreSQL, in order and in chunks of at most CHUNK_BYTES, every FOLLOW_INTERVAL while
the command runs and once more when it has ended, so that a line printed on a GPU host is
served by a web on another machine within a fraction of a second.

The database holds a prefix of the file: chunks contiguous from byte 0 up to the run's
shipped offset. A write says the offset it starts at, and the database stores it only when
that is its own offset (see `StoreLog`), so a write repeated after a lost reply, or one made
by an executor that took over, is never stored twice; the reply is the database's offset, and
the shipper re-syncs to it. A failed write (PostgreSQL down) keeps the offset: the same bytes
go again next time. After a restart of runagentd the re-adopted executor resumes from the
database's offset.

Past `cap_bytes` the shipper stores a last chunk, a note saying where the rest of the log is,
and stops: the run is marked capped, the local file keeps everything.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

logger = logging.getLogger("agentsys.log_shipping")

CHUNK_BYTES = 256 * 1024  # at most this much per database write
FOLLOW_INTERVAL = 0.15  # seconds between looks while the command runs
FAILED, RESYNCED = -1, -2  # what a write did besides storing
MAX_RESYNCS = 3  # per ship: a store that keeps disagreeing is not followed in a loop
SHIP_AT_STOP_SECONDS = 5.0  # a stopped run's last lines wait this long for the database
# ... and when runagentd is going away (the run goes on): the next runagentd's executor
# re-adopts the run and ships from the database's offset, so nothing is lost by waiting less,
# and runagentd's stop has 5 s in all (2.5 of them for its agents' ends).
SHIP_AT_DETACH_SECONDS = 1.0

# store(offset, data, capped) -> (the database's offset after it, whether the log is capped).
# It stores `data` at `offset` only when `offset` is the database's offset and the log is not
# capped yet; `capped` marks the log capped in the same transaction.
StoreLog = Callable[[int, bytes, bool], Awaitable[tuple[int, bool]]]


class LogShipper:
    def __init__(
        self,
        path: Path,
        store: StoreLog,
        *,
        cap_bytes: int,
        shipped: int = 0,
        capped: bool = False,
        chunk_bytes: int = CHUNK_BYTES,
        where: str = "",
    ):
        self.path = Path(path)
        self.store = store
        self.cap_bytes = max(0, cap_bytes)
        self.shipped = shipped  # the database's offset, as last heard
        self.capped = capped
        self.chunk_bytes = chunk_bytes
        self.where = where or str(self.path)  # the note's "kept only on ..."
        self.failing = False  # the last write failed: said once in the log, not each time

    async def ship(self) -> int:
        """Ship what the file grew by since the shipped offset, in order; returns the bytes
        stored. Never raises for a failed write: the next call sends the same bytes again."""
        stored, resyncs = 0, 0
        while not self.capped:
            wrote = await self._ship_one()
            if wrote == RESYNCED and resyncs < MAX_RESYNCS:
                resyncs += 1  # on from where the database is, at once
                continue
            if wrote <= 0:
                break
            stored += wrote
        return stored

    async def _ship_one(self) -> int:
        """One chunk (or the cap's note): the bytes stored; 0 when there is nothing new,
        FAILED when the write failed, RESYNCED when the database was somewhere else."""
        room = self.cap_bytes - self.shipped
        data = await asyncio.to_thread(self._read, min(self.chunk_bytes, max(room, 0) or 1))
        if not data:
            return 0
        capping = room <= 0  # the file went past the cap: the note, and stop
        if capping:
            data = self.cap_note()
        return await self._store(data, capping)

    async def _store(self, data: bytes, capping: bool) -> int:
        start = self.shipped
        try:
            offset, capped = await self.store(start, data, capping)
        except asyncio.CancelledError:
            raise
        except Exception:
            if not self.failing:
                logger.exception("could not store %s at byte %d; trying again", self.where, start)
            self.failing = True
            return FAILED
        if self.failing:
            logger.info("storing %s again from byte %d", self.where, start)
        self.failing = False
        self.capped = capped
        if offset != start + len(data):  # not stored: the database was elsewhere
            logger.info("%s: database at byte %d, not %d; re-synced", self.where, offset, start)
            self.shipped = offset
            return RESYNCED
        self.shipped = offset
        return len(data)

    def _read(self, size: int) -> bytes:
        try:
            with open(self.path, "rb") as log:
                log.seek(self.shipped)
                return log.read(size)
        except OSError:  # not created yet, or gone
            return b""

    def cap_note(self) -> bytes:
        mib = self.cap_bytes / 2**20
        return (
            f"\n[AgentSys: the log past {mib:g} MiB is kept only on {self.where} "
            "(AGENTSYS_LOG_DB_CAP_MB)]\n"
        ).encode()

    async def follow(self, interval: float = FOLLOW_INTERVAL) -> None:
        """Ship every `interval` seconds until cancelled (the command's life)."""
        while not self.capped:
            await self.ship()
            await asyncio.sleep(interval)

    async def finish(self, timeout: float | None = None) -> None:
        """The last ship, once the command ended: everything it wrote, before the run is
        said to have ended. Waits for the database, or at most `timeout` seconds."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                while not self.capped and await self.ship() >= 0 and self._behind():
                    await asyncio.sleep(0.1)  # a write failed: the database is back soon

    def _behind(self) -> bool:
        try:
            return os.stat(self.path).st_size > self.shipped
        except OSError:
            return False


async def follower_for(agent, path: Path) -> LogFollower | None:
    """Shipping for an executor's run log through its run port, from where the database
    is (a re-adopted run goes on where the lost executor stopped); None when the executor
    has no run to ship to (no run port, no Run row)."""
    runs = agent.runs
    if runs is None:
        return None
    try:
        position = await asyncio.to_thread(runs.run_log_position)
    except Exception:  # the run goes on; only its copy in the database is missing
        logger.exception("%s: could not read how much of its log is stored", agent.id)
        return None
    if position is None:
        return None

    async def store(offset: int, data: bytes, capped: bool) -> tuple[int, bool]:
        return await asyncio.to_thread(runs.append_run_log, offset=offset, data=data, capped=capped)

    host = agent.deployment.host_name
    shipper = LogShipper(
        path,
        store,
        cap_bytes=agent.deployment.log_db_cap_bytes,
        shipped=position[0],
        capped=position[1],
        where=f"host {host} at {path}" if host else str(path),
    )
    follower = LogFollower(shipper)
    follower.start()
    return follower


class LogFollower:
    """A LogShipper's `follow` as a background task the executor starts and stops."""

    def __init__(self, shipper: LogShipper):
        self.shipper = shipper
        self.task: asyncio.Task | None = None

    def start(self) -> None:
        if self.task is None:
            self.task = asyncio.create_task(self.shipper.follow(), name="log-shipping")

    async def stop(self, timeout: float | None = None) -> None:
        """Stop following, then ship what is left."""
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
            self.task = None
        await self.shipper.finish(timeout)


@contextlib.asynccontextmanager
async def shipping_log(agent, path: Path):
    """Ship the executor's run log while the block runs (the command's life), and what is
    left when it ends: all of it, waiting for the database, when the command ended; what
    SHIP_AT_STOP_SECONDS allow when the run was stopped, SHIP_AT_DETACH_SECONDS when its
    runagentd is stopping (the run goes on)."""
    follower = await follower_for(agent, path)
    try:
        yield follower
    except BaseException:
        if follower is not None:
            detached = getattr(agent, "detached", False)
            await follower.stop(SHIP_AT_DETACH_SECONDS if detached else SHIP_AT_STOP_SECONDS)
        raise
    if follower is not None:
        await follower.stop()
