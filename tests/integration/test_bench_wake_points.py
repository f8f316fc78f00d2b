"""bench/wake_latency.py's figures time what their names say (issue 40 §3), at a tiny size on
the real parts (record_rows's commit, its NOTIFY, the waits' one LISTEN connection and reads
thread): a wake is timed from the call that stored the row meeting the condition to the
waiter running again after the read that saw it, and the memory figure is read before the
waits are made and once every one of them waits."""

from __future__ import annotations

import asyncio

import pytest

from bench import wake_latency
from bench.wake_latency import BELOW, wake_ms
from scheduler_app import run_waits
from scheduler_app.metrics import series
from tests.call_watch import watch_calls

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
MANY = 20


@pytest.fixture
def sweep():
    """(sweep id, its runs' ids), and the waits' reads connection closed after."""
    yield wake_latency.sweep_of_runs(count=3)
    run_waits.close_reads_connection()


def _waiting_at_each_rss_read(monkeypatch) -> list[int]:
    seen, real = [], wake_latency._rss_mb

    def read() -> float:
        seen.append(run_waits.waiters().waiting)
        return real()

    monkeypatch.setattr(wake_latency, "_rss_mb", read)
    return seen


def test_wakes_run_from_the_store_call_to_the_waiter_after_its_read(sweep, monkeypatch):
    sweep_id, run_ids = sweep
    stores = watch_calls(monkeypatch, series, "record_rows")
    reads = watch_calls(monkeypatch, run_waits, "run_states")
    waiting_at_rss = _waiting_at_each_rss_read(monkeypatch)

    async def measure():
        one = await wake_latency.one_waiter(run_ids[0], samples=3)
        _growth, many = await wake_latency.many_waiters(sweep_id, run_ids[1], MANY, rounds=1)
        return one, many

    one, many = asyncio.run(measure())
    assert (len(one), len(many)) == (3, MANY)
    # The memory figure: read with none waiting yet, then with all of them waiting.
    assert waiting_at_rss == [0, MANY]
    crossing = [call for call in stores if call.kwargs["rows"][0]["loss"] < BELOW["below"]]
    for wake in [*one, *many]:
        # Start: just before record_rows was called with the row that meets the condition
        # (not once it returned: its commit, and the NOTIFY, are part of the figure).
        store = next(call for call in crossing if call.began >= wake.stored)
        assert not [call for call in stores if wake.stored <= call.began < store.began]
        # End: the waiter running again, after a read begun since that call had returned.
        assert any(store.began <= read.began and read.returned <= wake.resumed for read in reads), (
            "woken before any read could have seen the row"
        )
        assert wake_ms(wake) == pytest.approx((wake.resumed - wake.stored) * 1000)
