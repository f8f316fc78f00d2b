"""agentsys.proctree on real processes, without a daemon: a run's process set includes the
children that moved to another group or session, and terminate/suspend/resume reach them all."""

import asyncio
import contextlib
import os
import subprocess
import sys
import time

from agentsys import process_session
from agentsys.proctree import MARKER_VARIABLE, RunProcesses, is_running, process_info

TREE = (
    "trap '' TERM; setsid sleep 3011 & "
    f"{sys.executable} -c 'import os,time; os.setpgid(0, 0); time.sleep(3012)' & "
    "sleep 3013 & wait"
)


def start_tree(marker: str) -> tuple[subprocess.Popen, RunProcesses]:
    leader = subprocess.Popen(
        ["bash", "-c", TREE],
        env={**os.environ, MARKER_VARIABLE: marker},
        start_new_session=True,
        stdin=subprocess.DEVNULL,
    )
    processes = RunProcesses(marker, leader.pid, process_info(leader.pid).start_time)
    deadline = time.monotonic() + 10
    while not _set_up(leader.pid, processes.members()):
        assert time.monotonic() < deadline, processes.members()
        time.sleep(0.02)
    return leader, processes


def _set_up(leader: int, members) -> bool:
    """Bash and its three children, the first one in a session of its own and already
    `sleep`. `setsid` runs a moment after its process appears, then execs sleep, and a process
    in the middle of an exec shows no environment: for that moment its marker, the only thing
    that finds it, is gone (a busy machine widened both moments enough to be seen)."""
    others = [p for p in members if p.session != leader]
    return len(members) >= 4 and len(others) == 1 and _command(others[0].pid) == b"sleep 3011"


def _command(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return cmdline.read().rstrip(b"\0").replace(b"\0", b" ")
    except OSError:
        return b""


def test_the_set_holds_children_that_left_the_group_or_the_session():
    leader, processes = start_tree("run-a")
    try:
        sessions = {p.session for p in processes.members()}
        assert len(sessions) == 2  # the setsid child is found by its marker alone
        assert RunProcesses("", leader.pid, 0).members()  # the session alone: 3 of them
        assert len(RunProcesses("", leader.pid, 0).members()) == 3
        assert RunProcesses("run-b").members() == []  # another run's marker
    finally:
        asyncio.run(processes.terminate(grace=0))
        leader.wait()


def test_terminate_kills_what_ignores_sigterm_and_suspend_stops_everything():
    leader, processes = start_tree("run-c")
    try:
        stopped = asyncio.run(processes.suspend())
        assert len(stopped) == 4
        assert {p.state for p in processes.members()} == {"T"}
        asyncio.run(processes.resume())
        assert "T" not in {p.state for p in processes.members()}
        started = time.monotonic()
        assert asyncio.run(processes.terminate(grace=0.3)) == []
        assert 0.3 <= time.monotonic() - started < 3  # SIGTERM was ignored: SIGKILL after
        assert processes.members() == []
    finally:
        asyncio.run(processes.terminate(grace=0))
        leader.wait()


def test_a_session_whose_id_was_reused_is_not_the_run():
    leader, processes = start_tree("run-d")
    try:
        # Same session id, but named with a start time after every member's: not ours.
        later = RunProcesses("", leader.pid, processes.leader_start + 10**9)
        assert later.members() == []
    finally:
        asyncio.run(processes.terminate(grace=0))
        leader.wait()


def test_a_recorded_pid_and_start_time_name_one_live_process():
    child = subprocess.Popen(["sleep", "30"], stdin=subprocess.DEVNULL)
    try:
        started = str(process_info(child.pid).start_time)
        assert is_running(child.pid) and is_running(child.pid, started)
        assert not is_running(child.pid, str(int(started) + 1))  # the pid reused by another
    finally:
        child.kill()
    deadline = time.monotonic() + 10
    while process_info(child.pid).state != "Z":  # killed, not reaped yet
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert not is_running(child.pid, started)  # a zombie has ended
    child.wait()
    assert not is_running(child.pid) and not is_running(0)


def test_a_session_id_given_to_another_process_since_names_nothing_of_the_old_session():
    """Pids wrap around (32768 by default): a session recorded long ago may by now have its
    id as some other process's session, a user's shell or another agent. The recorded start
    time tells them apart, and nothing is signalled that is not the recorded session's."""
    other = subprocess.Popen(["sleep", "30"], start_new_session=True, stdin=subprocess.DEVNULL)
    try:
        start = process_info(other.pid).start_time
        assert RunProcesses("", other.pid, start).members()[0].pid == other.pid
        assert process_session.session_members(other.pid, start) == [other.pid]
        # The same id recorded for a session whose leader started at another time: over.
        assert RunProcesses("", other.pid, start - 1).members() == []
        assert process_session.session_members(other.pid, start - 1) == []
        assert process_session.kill_session(other.pid, start - 1) == []
        assert process_session.wait_session_empty(other.pid, start - 1, timeout=0)
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


def test_a_session_outlives_its_leader_while_one_member_lives():
    """The leader gone (exited, reaped), its id still names its session: the kernel gives
    that pid to no new process while a member lives, so the members are still found."""
    leader = subprocess.Popen(
        ["bash", "-c", "sleep 3014 & echo $!"],
        start_new_session=True,
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    start = process_info(leader.pid).start_time
    member = int(leader.stdout.readline())
    leader.wait()
    try:
        assert process_session.session_members(leader.pid, start) == [member]
        assert [p.pid for p in RunProcesses("", leader.pid, start).members()] == [member]
        assert process_session.kill_session(leader.pid, start) == [member]
        assert process_session.wait_session_empty(leader.pid, start, timeout=10)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(member, 9)
