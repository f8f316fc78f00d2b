"""How long runagentd sleeps between steps: woken by NOTIFY, else the fallback poll or the
next heartbeat, and never a tight loop while the database is failing."""

import asyncio

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
    with pytest.raises(OSError):
        asyncio.run(paced.heartbeat())
    assert down.heartbeats == 1
    assert 4.5 < paced._sleep_seconds() <= 5  # not 10 ms: no tight loop against a dead server


def test_listening_daemons_sleep_until_the_poll_or_the_heartbeat():
    listening = daemon(listen_dsn="host=db", poll_interval=5, heartbeat_interval=60)
    listening._last_beat = float("inf")  # just beat
    assert listening._sleep_seconds() == 5
    polling = daemon(poll_interval=5, heartbeat_interval=60)  # no LISTEN: poll every second
    polling._last_beat = float("inf")
    assert polling._sleep_seconds() == 1.0
