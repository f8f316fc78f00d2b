"""manage.py runagentd: registers its host, heart-beats, stops within 5 s on a signal."""

import signal
import subprocess
import time

import pytest

from hosts_app.models import Host, HostStatus
from scheduler_app.models import GPU
from tests.helpers import child_env, database_url_of_current_connection, manage, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
def test_registers_beats_and_stops_within_5s(stop_signal):
    env = child_env(
        DATABASE_URL=database_url_of_current_connection(),
        AGENTSYS_HOST_NAME="gpu-node-7",
        AGENTSYS_GPUS="0,1",
    )
    daemon = manage("runagentd", "--heartbeat", "0.2", env=env)
    try:
        host = wait_until(
            lambda: Host.objects.filter(name="gpu-node-7", status=HostStatus.ONLINE).first(),
            30,
            message="host registration",
        )
        assert host.daemon_pid == daemon.pid
        assert sorted(GPU.objects.filter(host=host).values_list("index", flat=True)) == [0, 1]
        first_beat = host.last_heartbeat
        wait_until(
            lambda: Host.objects.get(pk=host.pk).last_heartbeat > first_beat,
            5,
            message="a heartbeat",
        )
    finally:
        started = time.monotonic()
        daemon.send_signal(stop_signal)
        exit_code = daemon.wait(10)
        stopped_in = time.monotonic() - started
    assert exit_code == 0
    assert stopped_in < 5, f"stopped in {stopped_in:.2f} s"
    host.refresh_from_db()
    assert host.status == HostStatus.OFFLINE
    assert host.daemon_pid is None


def test_restart_reuses_the_host_row():
    env = child_env(DATABASE_URL=database_url_of_current_connection(), AGENTSYS_HOST_NAME="n1")
    for _ in range(2):
        daemon = manage("runagentd", env=env)
        wait_until(
            lambda pid=daemon.pid: Host.objects.filter(name="n1", daemon_pid=pid).exists(), 30
        )
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(10) == 0
    assert Host.objects.filter(name="n1").count() == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [(["--host-name", "no spaces allowed"], "--host-name"), (["--heartbeat", "0"], "--heartbeat")],
)
def test_bad_arguments_are_refused_clearly(args, message):
    env = child_env(DATABASE_URL=database_url_of_current_connection())
    daemon = manage("runagentd", *args, env=env, stderr=subprocess.PIPE, text=True)
    _, stderr = daemon.communicate(timeout=60)
    assert daemon.returncode != 0
    assert message in stderr
    assert "Traceback" not in stderr
    assert not Host.objects.exists()
