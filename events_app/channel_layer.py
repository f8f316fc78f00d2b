"""channels-postgres, made to survive a PostgreSQL restart.

Upstream (1.1.4) has gaps that a restart or a busy machine exposes:
- its LISTEN task dies with its connection and nothing starts it again: the task's "running"
  flag stays set, so every receiver of this process then waits for ever and live events
  stop reaching the web's clients until the process restarts;
- its connection pool hands out the connections the restart broke, one failed send or
  group_add per pooled connection, and reconnects them with a backoff that doubles without
  bound (1, 2, 4, ... s): after a 30 s outage the layer could stay dead for another 30 s;
- it leaves a group through Django's ORM, on a connection of daphne's that nothing closes
  after a restart; and a leave that fails while the database is down leaves the channel in
  the group for ever (group rows never expire), each later send storing a message for it.
- it starts a LISTEN task at every receive until the first one listens, so two sockets opening
  together make two, and every notification is then queued twice; the second copy of a message
  over 8,000 bytes (sent as a row id, read and deleted by the first) fails an assert, which
  killed the receiver's feed.
- at its listener's start it takes the queued messages of every process's channels, not only
  its own, so a runagentd starting took messages meant for the web's sockets.
- it reads the queued messages before it LISTENs: a message sent between the two is in neither,
  and after a reconnection (when senders are busy again at once) its receiver waited for ever.
Here only one LISTEN task runs per event loop, only its own queued messages are taken, a
message whose row is gone is skipped, the LISTEN task reconnects with backoff (and re-reads
the messages queued meanwhile, after it LISTENs again, dropping a message it is then notified
of as well), the pool checks a connection before lending it, and its reconnection backoff
stops growing at one second (psycopg_pool has no setting for that cap, so its attempt class
is replaced in its module: the only pool of these processes is this layer's); leaving a group
goes through the pool too, and a leave the database could not take is done again once it is
back.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
from datetime import UTC, datetime

import psycopg
import psycopg_pool.pool_async
from channels_postgres.core import PostgresChannelLayer
from channels_postgres.db import GROUP_CHANNEL_TABLE, MESSAGE_TABLE, DatabaseLayer
from psycopg import sql
from psycopg_pool import AsyncConnectionPool
from psycopg_pool.base import AttemptWithBackoff

from common.db_outage import is_database_unavailable

logger = logging.getLogger(__name__)

FIRST_RETRY_SECONDS = 0.1
MAX_RETRY_SECONDS = 1.0
# The pool logs every failed attempt; the outage is logged once, below.
logging.getLogger("psycopg.pool").setLevel(logging.ERROR)


class CappedBackoff(AttemptWithBackoff):
    INITIAL_DELAY = FIRST_RETRY_SECONDS * 2

    def update_delay(self, now: float) -> None:
        super().update_delay(now)
        self.delay = min(self.delay, MAX_RETRY_SECONDS)


psycopg_pool.pool_async.AttemptWithBackoff = CappedBackoff


class PooledDatabaseLayer(DatabaseLayer):
    own_channels = "%"  # a LIKE pattern: the channels of this process's layer

    async def retrieve_non_expired_queued_messages(self) -> list[tuple[str, str, bytes, str]]:
        """The messages queued for this process's channels, taken from the table. Upstream
        takes every process's: a runagentd (re)starting its listener swallowed the messages
        meant for the web's sockets, which then saw those events only at their next
        keepalive, up to 15 s later."""
        query = sql.SQL(
            "DELETE FROM {table} WHERE id IN (SELECT id FROM {table} WHERE expire > %s"
            " AND channel LIKE %s FOR UPDATE SKIP LOCKED)"
            " RETURNING id::text, channel, message, extract(epoch from expire)::text"
        ).format(table=sql.Identifier(MESSAGE_TABLE))
        pool = await self.get_db_pool(db_params=self.db_params)
        async with pool.connection() as conn, conn.cursor() as cursor:
            await cursor.execute(query, (datetime.now(UTC), self.own_channels))
            return await cursor.fetchall()

    async def delete_channel_group(self, group_key: str, channel: str) -> None:
        query = sql.SQL("DELETE FROM {} WHERE group_key = %s AND channel = %s").format(
            sql.Identifier(GROUP_CHANNEL_TABLE)
        )
        pool = await self.get_db_pool(db_params=self.db_params)
        async with pool.connection() as conn:
            await conn.execute(query, (group_key, channel))


class ReconnectingPostgresChannelLayer(PostgresChannelLayer):
    def __init__(self, *args, **kwargs):
        options = dict(kwargs.pop("PSYCOPG_OPTIONS", None) or {})
        options.setdefault("check", AsyncConnectionPool.check_connection)
        super().__init__(*args, PSYCOPG_OPTIONS=options, **kwargs)
        # The library's own logger (quietened in settings): it warns on every event sent to a
        # group nobody follows yet, which is most of them on an idle server.
        self.django_db = PooledDatabaseLayer(
            options, self.db_params, logger=logging.getLogger("channels_postgres.core")
        )
        # new_channel() names are "<prefix>.<client_prefix>!<random>"; "_" is LIKE's any-one.
        self.django_db.own_channels = f"%.{self.client_prefix}!%"
        self._leave_later: set[tuple[str, str]] = set()
        self._listening_loop: asyncio.AbstractEventLoop | None = None

    def _get_or_create_listener_task(self) -> tuple[asyncio.Event, bool]:
        loop = asyncio.get_running_loop()
        if self._listening_loop is loop and self.listener_task_is_running is not None:
            return self.listener_task_is_running, False
        # A new loop (a test's, or the first): its own flag, as an Event belongs to one loop.
        self._listening_loop = self.event_loop = loop
        self.listener_task_is_running = asyncio.Event()
        return self.listener_task_is_running, True

    async def _get_message_from_channel(self, channel: str, queue: asyncio.Queue[str]) -> dict:
        while True:
            message_id, _, rest = (await queue.get()).partition(":")
            fields = rest.split(":")
            if len(fields) == 3:  # channel:base64 message:expiry, sent whole in the NOTIFY
                if float(fields[2]) < time.time():
                    continue
                return self.deserialize(base64.b64decode(fields[1]))
            row = await self.django_db.delete_message_returning_message(int(message_id))
            if row is not None:  # else read already (a copy of this notification): skip it
                return self.deserialize(row[0])

    async def group_discard(self, group: str, channel: str, expire=None) -> None:
        try:
            await super().group_discard(group, channel, expire)
        except Exception as error:
            if is_database_unavailable(error):
                self._leave_later.add((group, channel))
            raise

    async def leave_what_could_not_be_left(self) -> None:
        for group, channel in list(self._leave_later):
            await super().group_discard(group, channel)
            self._leave_later.discard((group, channel))

    async def listen_to_all_channels(self) -> None:
        delay, lost_at = FIRST_RETRY_SECONDS, None
        while True:
            try:
                if lost_at is not None:
                    await self._reconnected(lost_at)
                    lost_at = None
                await self._listen()
                self._listening_loop = None  # told to shut down: the next receive starts one
                return
            except asyncio.CancelledError:
                raise
            except Exception as error:
                if lost_at is None:
                    lost_at = asyncio.get_running_loop().time()
                    gist = (str(error).strip().splitlines() or [type(error).__name__])[0]
                    logger.warning("channel layer lost its LISTEN connection (%s)", gist)
                await asyncio.sleep(delay)
                delay = min(delay * 2, MAX_RETRY_SECONDS)

    async def _listen(self) -> None:
        """Hand every message for this process's channels to its channel's queue: those
        queued in the table, then each one notified, until told to shut down."""
        conninfo = psycopg.conninfo.make_conninfo(conninfo="", **self.db_params)
        async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as listener:
            await listener.execute("LISTEN channels_postgres_messages;")
            # Read the table only now: a message sent meanwhile is notified (psycopg keeps
            # what comes before notifies() runs), read, or both; taken remembers which.
            taken = set()
            for message_id, channel, message, expire in sorted(
                await self.django_db.retrieve_non_expired_queued_messages(),
                key=lambda row: int(row[0]),
            ):
                encoded = base64.b64encode(message).decode()
                self._get_or_create_queue(channel).put_nowait(
                    f"{message_id}:{channel}:{encoded}:{expire}"
                )
                taken.add(message_id)
            self.listener_task_is_running.set()
            async for notice in listener.notifies():
                if notice.payload == "1:shutdown":
                    self.listener_task_is_running.clear()
                    return
                message_id, _, rest = notice.payload.partition(":")
                if message_id in taken:
                    taken.discard(message_id)
                    continue
                channel = rest.partition(":")[0]
                # Another process holds the channel's advisory lock: its message, not ours.
                if self._channel_advisory_locks.get(channel, False):
                    self._get_or_create_queue(channel).put_nowait(notice.payload)

    async def _reconnected(self, lost_at: float) -> None:
        # Probe first, so that a database still down does not count as a reconnection.
        pool = await self.django_db.get_db_pool(db_params=self.db_params)
        async with pool.connection() as conn:
            await conn.execute("SELECT 1")
        await self.leave_what_could_not_be_left()
        logger.warning(
            "channel layer reconnected after %.1fs", asyncio.get_running_loop().time() - lost_at
        )
