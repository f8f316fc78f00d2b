"""How long runagentd sleeps between steps: woken by NOTIFY, else the fallback poll or the
next heartbeat, and never a tight loop while the database is failing."""

import asyncio
import time

import pytest

from agentsys.daemon import Daemon, DaemonSettings


class DatabaseDown:
    def __init__(self):
        self.heartbeats = 0

    def record_heartbeat(self, *, host_id):
        self.heartbeats += 1
        raise OSError("connection refused")


def daemon(store=None, **settings) -> Daemon:
    return Daemon(store or DatabaseDown(), DaemonSettings(host_name="pace", **settings))


def test_a_failing_heartbeat_is_retried_at_the_heartbeats_pace():
    down = DatabaseDown()
    paced = daemon(down, listen_dsn="host=nowhere", poll_interval=30, heartbeat_interval=5)
    paced._last_poll = time.monotonic()  # the loop's first step looked at everything
    with pytest.raises(OSError):
        asyncio.run(paced.heartbeat())
    assert down.heartbeats == 1
    assert 4.5 < paced._sleep_seconds() <= 5  # not 10 ms: no tight loop against a dead server


def test_listening_daemons_sleep_until_the_poll_or_the_heartbeat():
    listening = daemon(listen_dsn="host=db", poll_interval=5, heartbeat_interval=60)
    listening._last_beat = listening._last_poll = time.monotonic()  # just beat and polled
    assert listening._sleep_seconds() == pytest.approx(5, abs=0.5)
    polling = daemon(poll_interval=5, heartbeat_interval=60)  # no LISTEN: poll every second
    polling._last_beat = polling._last_poll = time.monotonic()
    assert polling._sleep_seconds() == pytest.approx(1.0, abs=0.5)


class IdleStore:
    """Nothing to do anywhere; counts what a step asks."""

    def __init__(self):
        self.asked: list[str] = []

    def __getattr__(self, name):
        def call(**kwargs):
            self.asked.append(name)
            return []

        return call

    def record_heartbeat(self, *, host_id):
        self.asked.append("record_heartbeat")
        return False  # not declared dead meanwhile


class NoAgents:
    hosted: dict = {}
    slurm_poller = None

    async def tell_parents_of_finished_children(self):
        pass


def test_a_wake_for_the_heartbeat_alone_beats_and_claims_nothing():
    store = IdleStore()
    idle = daemon(store, listen_dsn="host=db", poll_interval=5, heartbeat_interval=0.5)
    idle.host_id, idle._db_back_at = 1, float("-inf")
    idle.supervisor = NoAgents()
    idle._last_poll = time.monotonic()  # just looked at everything
    idle._last_beat = time.monotonic() - 1  # the heartbeat is due
    assert idle._sleep_seconds() == 0.01
    assert not idle._poll_due()  # so the wake brings no news: set(), not None
    asyncio.run(idle._step(set()))
    assert store.asked == ["record_heartbeat", "declare_dead_hosts"]

    idle._last_poll -= 5  # the fallback poll's turn: every claim again
    assert idle._poll_due()
    asyncio.run(idle._step(None))
    assert {"claim_commands", "claim_queue", "claim_pending_agents"} <= set(store.asked[2:])
