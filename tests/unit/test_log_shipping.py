"""LogShipper (agentsys.log_shipping) against a fake store that keeps the database's contract
(a chunk is stored only at the stored log's end; the reply is that end): the log arrives in
order and byte-exact, a database outage loses nothing and repeats nothing, a shipper that is
behind or ahead of the database re-syncs, and the cap leaves one note."""

from __future__ import annotations

import asyncio

import pytest

from agentsys.log_shipping import (
    SHIP_AT_DETACH_SECONDS,
    SHIP_AT_STOP_SECONDS,
    LogFollower,
    LogShipper,
)


class FakeLogTable:
    """The run's row and its chunks, as scheduler_app.runs.log_store keeps them."""

    def __init__(self):
        self.chunks: list[tuple[int, bytes]] = []
        self.capped = False
        self.down = False
        self.calls = 0

    @property
    def end(self) -> int:
        return sum(len(data) for _, data in self.chunks)

    def stored(self) -> bytes:
        return b"".join(data for _, data in self.chunks)

    async def store(self, offset: int, data: bytes, capped: bool) -> tuple[int, bool]:
        self.calls += 1
        if self.down:
            raise ConnectionError("the database is restarting")
        if offset == self.end and not self.capped:
            self.chunks.append((offset, data))
            self.capped = capped
        return self.end, self.capped


@pytest.fixture
def table():
    return FakeLogTable()


def shipper(tmp_path, table, **options) -> LogShipper:
    options.setdefault("cap_bytes", 2**20)
    return LogShipper(tmp_path / "run.log", table.store, where="host gpu-b at x", **options)


def append(tmp_path, data: bytes) -> None:
    with open(tmp_path / "run.log", "ab") as log:
        log.write(data)


async def test_what_the_log_grows_by_is_stored_in_order_in_bounded_chunks(tmp_path, table):
    ship = shipper(tmp_path, table, chunk_bytes=1000)
    assert await ship.ship() == 0  # no file yet: nothing, and no error
    written = bytes(range(256)) * 20  # 5120 bytes, not text: stored as they are
    append(tmp_path, written)
    assert await ship.ship() == len(written)
    append(tmp_path, b"a line printed after a pause\n")
    await ship.ship()
    assert table.stored() == (tmp_path / "run.log").read_bytes()
    assert max(len(data) for _, data in table.chunks) == 1000
    assert [offset for offset, _ in table.chunks] == [0, 1000, 2000, 3000, 4000, 5000, 5120]


async def test_a_database_outage_keeps_the_offset_and_loses_and_repeats_nothing(tmp_path, table):
    ship = shipper(tmp_path, table, chunk_bytes=4)
    append(tmp_path, b"before\n")
    await ship.ship()
    table.down = True
    append(tmp_path, b"during the outage\n")
    assert await ship.ship() == 0
    assert await ship.ship() == 0  # tried again, still down
    assert ship.shipped == len(b"before\n")
    table.down = False
    append(tmp_path, b"after\n")
    await ship.ship()
    assert table.stored() == b"before\nduring the outage\nafter\n"


async def test_a_write_whose_reply_was_lost_is_not_stored_twice(tmp_path, table):
    append(tmp_path, b"one\ntwo\n")
    real_store = table.store

    async def stored_then_lost(offset, data, capped):
        await real_store(offset, data, capped)
        raise ConnectionError("connection closed before the reply")

    ship = LogShipper(tmp_path / "run.log", stored_then_lost, cap_bytes=2**20)
    await ship.ship()  # stored, but the shipper does not know it
    assert ship.shipped == 0
    ship.store = real_store
    await ship.ship()  # refused at 0, told 8: re-synced, nothing more to send
    await ship.ship()
    assert table.stored() == b"one\ntwo\n" and len(table.chunks) == 1


async def test_a_shipper_behind_or_ahead_of_the_database_resyncs_to_it(tmp_path, table):
    append(tmp_path, b"0123456789abcdef")
    await shipper(tmp_path, table, chunk_bytes=10).ship()  # a first executor stored all 16
    behind = shipper(tmp_path, table, shipped=4)  # a second one that thinks 4
    append(tmp_path, b"-more")
    await behind.ship()
    assert behind.shipped == 21 and table.stored() == b"0123456789abcdef-more"
    ahead = shipper(tmp_path, table, shipped=30)
    await ahead.ship()  # nothing past its 30 in the file: it reads nothing, stores nothing
    assert table.stored() == b"0123456789abcdef-more"


async def test_resuming_from_the_stored_offset_sends_only_the_rest(tmp_path, table):
    append(tmp_path, b"first half\n")
    await shipper(tmp_path, table).ship()
    append(tmp_path, b"second half\n")
    resumed = shipper(tmp_path, table, shipped=table.end, capped=table.capped)
    calls = table.calls
    await resumed.ship()
    assert table.calls == calls + 1
    assert table.stored() == b"first half\nsecond half\n"


async def test_past_the_cap_one_note_is_stored_and_shipping_stops(tmp_path, table):
    ship = shipper(tmp_path, table, cap_bytes=10, chunk_bytes=4)
    append(tmp_path, b"0123456789")
    await ship.ship()
    assert not table.capped  # exactly at the cap: nothing was left out
    append(tmp_path, b"past the cap\n")
    await ship.ship()
    assert table.capped and ship.capped
    stored = table.stored()
    assert stored.startswith(b"0123456789\n[AgentSys: the log past ")
    assert b"kept only on host gpu-b at x" in stored
    append(tmp_path, b"more\n")
    calls = table.calls
    await ship.ship()
    await ship.finish()
    assert table.calls == calls and table.stored() == stored


async def test_a_capped_log_is_not_shipped_again_after_a_restart(tmp_path, table):
    append(tmp_path, b"x" * 20)
    await shipper(tmp_path, table, cap_bytes=8).ship()
    assert table.capped
    resumed = shipper(tmp_path, table, cap_bytes=8, shipped=table.end, capped=True)
    calls = table.calls
    await resumed.ship()
    assert table.calls == calls


async def test_the_follower_ships_while_it_runs_and_the_rest_when_stopped(tmp_path, table):
    follower = LogFollower(shipper(tmp_path, table))
    follower.start()
    append(tmp_path, b"early\n")
    for _ in range(100):
        if table.stored() == b"early\n":
            break
        await asyncio.sleep(0.02)
    assert table.stored() == b"early\n"  # shipped while it ran, within a few ticks
    append(tmp_path, b"last words\n")
    table.down = True

    async def back_soon():
        await asyncio.sleep(0.3)
        table.down = False

    back = asyncio.create_task(back_soon())
    await follower.stop()  # waits out the outage: nothing is left behind
    await back
    assert table.stored() == b"early\nlast words\n"


async def test_a_stop_gives_up_after_its_timeout_when_the_database_stays_down(tmp_path, table):
    follower = LogFollower(shipper(tmp_path, table))
    append(tmp_path, b"unsent\n")
    table.down = True
    await asyncio.wait_for(follower.stop(timeout=0.3), 5)
    assert table.stored() == b""


class RunPortOfADownDatabase:
    """An executor's run port (agentsys.run_port) while the database is down."""

    def run_log_position(self):
        return 0, False

    def append_run_log(self, *, offset, data, capped):
        raise ConnectionError("the database is down")


async def test_a_stopping_runagentd_leaves_the_rest_of_the_log_to_the_next_one(tmp_path):
    """Its run goes on; the next runagentd ships from the database's offset. So its stop
    waits SHIP_AT_DETACH_SECONDS for the database, not a stopped run's 5 s: runagentd has 5 s
    in all to stop."""
    from types import SimpleNamespace

    from agentsys.log_shipping import shipping_log

    agent = SimpleNamespace(
        id="executor-1",
        runs=RunPortOfADownDatabase(),
        deployment=SimpleNamespace(host_name="gpu-b", log_db_cap_bytes=2**20),
        detached=True,
    )
    append(tmp_path, b"step 1\n")
    started = asyncio.get_running_loop().time()
    with pytest.raises(asyncio.CancelledError):
        async with shipping_log(agent, tmp_path / "run.log"):
            raise asyncio.CancelledError  # the stop (detached: runagentd's)
    took = asyncio.get_running_loop().time() - started
    # It tried for its second; a stopped run's last lines would wait 5 s.
    assert SHIP_AT_DETACH_SECONDS - 0.2 < took < SHIP_AT_STOP_SECONDS - 1
