"""A worker whose runagentd died must end even when its pipe never reports EOF (another
process may still hold the supervisor's end) and even when its agent will not wind down."""

from __future__ import annotations

import multiprocessing
import subprocess
import time

from agentsys.ipc import Ev
from agentsys.worker import ORPHAN_EXIT_SECONDS, WorkerSpec, run_worker
from tests import runtime_agents
from tests.helpers import wait_until

RESEARCH = f"{runtime_agents.MODULE}.TestResearch"


def start_worker(supervisor_pid: int, **config):
    context = multiprocessing.get_context("spawn")
    ours, theirs = context.Pipe(duplex=True)
    spec = WorkerSpec(
        agent_id="orphan-test",
        cls_path=RESEARCH,
        goal="tick",
        config={"forever": True, **config},
        scope={"project": "demo"},
        allowed_classes=frozenset({RESEARCH}),
        supervisor_pid=supervisor_pid,
    )
    process = context.Process(target=run_worker, args=(spec, theirs))
    process.start()
    theirs.close()
    return process, ours


def messages(conn) -> list[str]:
    kinds = []
    while conn.poll(0.1):
        try:
            kinds.append(conn.recv()["t"])
        except EOFError:
            break
    return kinds


def test_the_supervisor_dying_stops_the_worker_though_its_pipe_stays_open():
    supervisor = subprocess.Popen(["sleep", "60"])
    worker, pipe = start_worker(supervisor.pid)
    wait_until(lambda: pipe.poll(0.1), 20, message="the worker to start")
    assert Ev.STARTED in messages(pipe)
    time.sleep(0.5)
    assert worker.is_alive()  # a live supervisor keeps it running

    supervisor.kill()
    supervisor.wait()
    worker.join(5)
    assert not worker.is_alive(), "the worker outlived its supervisor"
    assert worker.exitcode == 0
    assert Ev.STOPPED in messages(pipe)  # it stopped its agent in an orderly way
    pipe.close()


def test_an_orphaned_worker_whose_agent_will_not_stop_still_ends():
    supervisor = subprocess.Popen(["sleep", "60"])
    worker, pipe = start_worker(supervisor.pid, ignore_stop=True, emit_ticks=True)
    # Its agent must be inside its (stop-ignoring) loop: killed before it got there, it would
    # see the stop on entry and end cleanly, which is not what this test is about.
    wait_until(lambda: pipe.poll(0.1) and pipe.recv()["t"] == Ev.EMIT, 20, message="a tick")
    supervisor.kill()
    supervisor.wait()
    killed_at = time.monotonic()
    worker.join(ORPHAN_EXIT_SECONDS + 5)
    assert not worker.is_alive(), "a hung orphan kept running"
    assert worker.exitcode == 1
    assert time.monotonic() - killed_at >= ORPHAN_EXIT_SECONDS - 0.5  # it was given its grace
    pipe.close()


def test_a_supervisor_already_gone_at_start_stops_the_worker_at_once():
    supervisor = subprocess.Popen(["true"])
    supervisor.wait()
    worker, pipe = start_worker(supervisor.pid)
    worker.join(20)
    assert not worker.is_alive()
    assert Ev.STOPPED in messages(pipe)
    pipe.close()
