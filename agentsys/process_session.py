"""A child started with `start_new_session=True` leads a session: every process it forks (and
every process those fork, whatever group they move to) carries its session id. Whether such a
child is gone is a question about the whole session, never about the leader alone: a leader
that exits first leaves its workers running."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

PROC = Path("/proc")


def _stat(pid: int) -> list[str]:
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return []
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    return text[text.rfind(")") + 2 :].split()


def session_members(sid: int) -> list[int]:
    """Pids of the live (not zombie) processes whose session id is `sid`."""
    members = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat(int(entry.name))
        # fields[0] is the state, fields[3] the session id (fields 3 and 6 of proc(5)).
        if len(fields) > 3 and fields[0] != "Z" and int(fields[3]) == sid:
            members.append(int(entry.name))
    return members


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


def start_time(pid: int) -> str:
    """Clock ticks since boot when `pid` started (field 22 of stat): with the pid, it names
    one process even after the pid is reused. "" when there is no such process."""
    fields = _stat(pid)
    return fields[19] if len(fields) > 19 and fields[0] != "Z" else ""
