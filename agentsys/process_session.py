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

from agentsys.proctree import all_processes


def session_members(sid: int) -> list[int]:
    """Pids of the live (not zombie) processes whose session id is `sid`."""
    return [p.pid for p in all_processes() if p.state != "Z" and p.session == sid]


def wait_session_empty(sid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while session_members(sid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def kill_session(sid: int, sig: int = signal.SIGKILL) -> list[int]:
    """Send `sig` to every process of the session; returns the pids it was sent to."""
    members = session_members(sid)
    for pid in members:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
    return members
