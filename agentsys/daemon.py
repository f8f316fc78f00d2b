"""The runagentd core: the long-running process that hosts all agent activity on one host.

No Django here. The daemon reaches the database only through `DaemonStore`, whose Django
implementation lives in scheduler_app.daemon_store. Every database call runs on one
dedicated thread (`_db`), so the event loop never blocks on I/O and the ORM keeps one
connection. Each step (register, heartbeat, ...) is a method a test can call on its own.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

logger = logging.getLogger("agentsys.daemon")


class DaemonStore(Protocol):
    """What the daemon needs from the database."""

    def register_host(self, *, name: str, pid: int, declared_gpus: list[int] | None) -> int: ...

    def record_heartbeat(self, *, host_id: int) -> None: ...

    def mark_host_offline(self, *, host_id: int) -> None: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class DaemonSettings:
    host_name: str
    declared_gpus: list[int] | None = None
    heartbeat_interval: float = 5.0


class Daemon:
    def __init__(self, store: DaemonStore, settings: DaemonSettings):
        self.store = store
        self.settings = settings
        self.host_id: int | None = None
        self._stopping = asyncio.Event()
        # One thread for all database work: the ORM's connection is per thread.
        self._db_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="agentsys-db")

    async def _db(self, fn, /, **kwargs):
        return await asyncio.get_running_loop().run_in_executor(
            self._db_thread, lambda: fn(**kwargs)
        )

    # -- steps ----------------------------------------------------------------------------

    async def register(self) -> int:
        self.host_id = await self._db(
            self.store.register_host,
            name=self.settings.host_name,
            pid=os.getpid(),
            declared_gpus=self.settings.declared_gpus,
        )
        logger.info(
            "runagentd %s registered host %r (id %s)",
            os.getpid(),
            self.settings.host_name,
            self.host_id,
        )
        return self.host_id

    async def heartbeat(self) -> None:
        assert self.host_id is not None, "register() first"
        await self._db(self.store.record_heartbeat, host_id=self.host_id)

    async def shutdown(self) -> None:
        if self.host_id is not None:
            await self._db(self.store.mark_host_offline, host_id=self.host_id)
        await self._db(self.store.close)
        self._db_thread.shutdown(wait=True)
        logger.info("runagentd %s stopped", os.getpid())

    # -- the loop ---------------------------------------------------------------------------

    def request_stop(self) -> None:
        self._stopping.set()

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_stop)
        try:
            await self.register()
            while not self._stopping.is_set():
                try:
                    await asyncio.wait_for(
                        self._stopping.wait(), timeout=self.settings.heartbeat_interval
                    )
                except TimeoutError:
                    await self._beat_safely()
        finally:
            await self.shutdown()

    async def _beat_safely(self) -> None:
        # A database hiccup must not kill the daemon; the next beat tries again.
        try:
            await self.heartbeat()
        except Exception:
            logger.exception("heartbeat failed; retrying in %ss", self.settings.heartbeat_interval)
