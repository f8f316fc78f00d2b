"""No quick_bash command outlives the MCP server that ran it.

A call's own end (done, timed out, cancelled) kills what it started (agentsys.mcp.workdir_tools).
What this module adds is the server's end: OpenCode stops a server with SIGTERM (or closes its
stdin), and a server killed outright (SIGKILL, OOM) leaves its commands running with nobody to
answer to. So each command's marker names the server's pid; a server that is told to stop kills
its live commands before it goes, and a server that starts kills every command whose server is
gone (the next session's server cleans up after a killed one).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal

from agentsys.proctree import (
    MARKER_VARIABLE,
    RunProcesses,
    all_processes,
    is_running,
    process_info,
    read_environ,
)

PREFIX = "quick-bash-"
_live: dict[str, RunProcesses] = {}  # marker -> the processes of a command in progress


def new_marker() -> str:
    """A marker for one command: this server's pid and start time, then a random part."""
    own = os.getpid()
    return f"{PREFIX}{own}-{_start_time(own)}-{secrets.token_hex(6)}"


def starting(marker: str) -> RunProcesses:
    """Name a command before it is spawned: a stop that comes between the fork and `started`
    (the child runs while the server still waits on the spawn) finds it by its marker."""
    pending = _live[marker] = RunProcesses(marker)
    return pending


def started(processes: RunProcesses) -> None:
    """The spawned command, by its session too (cheaper to find, and a child that drops
    the marker is still in it)."""
    _live[processes.marker] = processes


def ended(processes: RunProcesses) -> None:
    _live.pop(processes.marker, None)


def kill_live_commands() -> int:
    """SIGKILL every process of this server's commands in progress (at its stop)."""
    killed = 0
    for processes in list(_live.values()):
        for _ in range(3):  # a fork racing the first kill is caught by the next
            pids = processes.signal_all(signal.SIGKILL)
            killed += len(pids)
            if not pids:
                break
    _live.clear()
    return killed


def kill_orphans() -> list[int]:
    """SIGKILL the processes of commands whose server is gone; returns their pids."""
    killed = []
    for info in all_processes():
        if info.state in ("Z", "X"):
            continue
        marker = _marker_of(info.pid)
        if marker is None or _server_lives(marker):
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(info.pid, signal.SIGKILL)
            killed.append(info.pid)
    return killed


def stop_on_signals() -> None:
    """SIGTERM, SIGHUP, SIGINT: kill the commands in progress, then leave."""

    def leave(signum, _frame):
        kill_live_commands()
        os._exit(128 + signum)

    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, leave)


def _marker_of(pid: int) -> str | None:
    try:
        environ = read_environ(pid)
    except OSError:  # gone, or another user's process
        return None
    entry = next((e for e in environ if e.startswith(f"{MARKER_VARIABLE}={PREFIX}".encode())), None)
    return entry.split(b"=", 1)[1].decode("ascii", "replace") if entry else None


def _server_lives(marker: str) -> bool:
    try:
        pid, start_time, _ = marker[len(PREFIX) :].split("-", 2)
        return is_running(int(pid), start_time)
    except ValueError:
        return True  # not a marker of ours: never kill on a guess


def _start_time(pid: int) -> str:
    info = process_info(pid)
    return str(info.start_time) if info else "0"
