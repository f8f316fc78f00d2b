"""Several web processes on one port (AGENTSYS_WEB_PROCESSES, researchagent.web_processes): clients
are spread over all of them, a stop ends them all within the web's deadline, and one that
dies takes the web down whole, for `manage.py serve` to restart it."""

from __future__ import annotations

import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import psutil
import pytest

from scheduler_app.models import Run
from tests.helpers import wait_until
from tests.live_clients import TOKEN, Web

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

CLIENTS = 20
STOP_GOAL_SECONDS = 3.0


def _children(web: Web) -> list[psutil.Process]:
    return psutil.Process(web.process.pid).children()


def _connections_on(process: psutil.Process, port: int) -> int:
    return sum(
        1
        for conn in process.net_connections(kind="tcp")
        if conn.status == psutil.CONN_ESTABLISHED and conn.laddr.port == port
    )


def _listens(process: psutil.Process, port: int) -> bool:
    return any(
        conn.status == psutil.CONN_LISTEN and conn.laddr.port == port
        for conn in process.net_connections(kind="tcp")
    )


def _refused(port: int) -> bool:
    try:
        httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=2)
    except httpx.ConnectError:
        return True
    return False


def test_clients_are_spread_over_every_process_and_a_stop_ends_them_all(tmp_path):
    web = Web(processes=2)
    children = _children(web)
    assert len(children) == 2
    local, clients, lock = threading.local(), [], threading.Lock()

    def make_run(index: int) -> int:
        if not hasattr(local, "client"):  # a connection per client, kept open
            local.client = httpx.Client(base_url=web.url, headers={"X-Auth-Token": TOKEN})
            with lock:
                clients.append(local.client)
        body = {"name": f"spread-{index}", "command": "true", "workdir": str(tmp_path)}
        return local.client.post("/api/runs", json=body).status_code

    try:
        # Listening, by the port file, means every one of them does: none starts with all.
        assert all(_listens(child, web.port) for child in children)
        with ThreadPoolExecutor(CLIENTS) as pool:
            codes = list(pool.map(make_run, range(CLIENTS * 3)))
        assert codes == [201] * (CLIENTS * 3)
        names = set(Run.objects.filter(name__startswith="spread-").values_list("name", flat=True))
        assert names == {f"spread-{index}" for index in range(CLIENTS * 3)}
        served = [_connections_on(child, web.port) for child in children]
        # The kernel hashes each connection to one of them: both hold some of the clients'.
        assert sum(served) == len(clients) and all(served), served

        took = web.stop()
    finally:
        for client in clients:
            client.close()
        if web.process.poll() is None:  # a failed check above: its connections must go
            web.stop()
    assert took < STOP_GOAL_SECONDS + 1.0, took  # the parent waits for the slowest child
    assert web.process.returncode == 0
    assert not any(child.is_running() for child in children)
    assert _refused(web.port)


def test_a_web_process_that_dies_takes_the_web_down_for_serve_to_restart():
    web = Web(processes=2)
    first, second = _children(web)
    assert _listens(first, web.port) and _listens(second, web.port)
    first.send_signal(signal.SIGKILL)
    started = time.monotonic()
    web.process.wait(STOP_GOAL_SECONDS + 2)
    assert time.monotonic() - started < STOP_GOAL_SECONDS + 1.0
    assert web.process.returncode != 0  # serve counts it a crash and restarts the web
    wait_until(lambda: not second.is_running(), 5, message="the other web process to end")
    assert _refused(web.port)
