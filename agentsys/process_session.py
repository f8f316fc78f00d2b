"""A child started with `start_new_session=True` leads a session: every process it forks (and
every process those fork, whatever group they move to) carries its session id. Whether such a
child is gone is a question about the whole session, never about the leader alone: a leader
that exits first leaves its workers running. The processes are read through agentsys.proctree.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

from agentsys.proctree import all_processes, session_is_theirs


def session_members(sid: int, leader_start: int) -> list[int]:
    """Pids of the live (not zombie) processes of the session its leader (pid `sid`) started
    at `leader_start` (clock ticks after boot): none once that id names another session."""
    if not session_is_theirs(sid, leader_start):
        return []
    return [p.pid for p in all_processes() if p.state != "Z" and p.session == sid]


def wait_session_empty(sid: int, leader_start: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while session_members(sid, leader_start):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def kill_session(sid: int, leader_start: int, sig: int = signal.SIGKILL) -> list[int]:
    """Send `sig` to every process of the session; returns the pids it was sent to."""
    members = session_members(sid, leader_start)
    for pid in members:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
    return members
