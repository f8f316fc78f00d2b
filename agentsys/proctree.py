"""Every process of one run, found through /proc, and the signals that stop, pause and
resume them all. The one reader of /proc/<pid>/stat (process_info): agentsys.process_session,
the executor and the project's embedded database see processes through it.

A run's command starts as the leader of its own session. Its processes are those of that
session (a child that moved to another process group is still in it), plus any process
carrying the run's marker in its environment (`AGENTSYS_RUN_ID=<agent id>`, inherited through
fork and exec, so a grandchild that called setsid() is found too). Liveness is that whole
set, never the leader alone: the leader can die while a child that ignores SIGTERM goes on
holding the run's GPU.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from dataclasses import dataclass

MARKER_VARIABLE = "AGENTSYS_RUN_ID"
POLL_SECONDS = 0.05
STOPPED_STATES = frozenset("Tt")


@dataclass(frozen=True)
class ProcessInfo:
    pid: int
    state: str
    session: int
    start_time: int  # clock ticks since boot


@dataclass(frozen=True)
class RunProcesses:
    """Names one run's processes: the session its leader started (0 when unknown, e.g. a
    re-adopted run whose leader is gone) and its environment marker ("" for none)."""

    marker: str
    leader: int = 0
    leader_start: int = 0

    @classmethod
    def session_of(cls, pid: int | None) -> RunProcesses:
        """The session `pid` leads (a worker's): name it while the leader lives, so the
        set stays right after the leader is gone."""
        info = process_info(pid) if pid else None
        if info is None or info.session != pid:
            return cls(marker="")  # not a session leader (or gone): names nothing
        return cls(marker="", leader=pid, leader_start=info.start_time)

    @property
    def marker_entry(self) -> bytes:
        return f"{MARKER_VARIABLE}={self.marker}".encode()

    def members(self) -> list[ProcessInfo]:
        """The run's live processes (zombies are dead: they only wait to be reaped)."""
        found = []
        own = os.getpid()
        session = self.leader if session_is_theirs(self.leader, self.leader_start) else 0
        for info in all_processes():
            if info.pid == own or info.state in ("Z", "X"):
                continue
            if self._in_session(info, session) or (
                # Only a process younger than the run can have inherited its marker: no need
                # to read the environment of every older process on a busy host.
                self.marker
                and info.start_time >= self.leader_start
                and _has_marker(info.pid, self.marker_entry)
            ):
                found.append(info)
        return found

    def _in_session(self, info: ProcessInfo, session: int) -> bool:
        # A session outlives its leader under the same id; a process older than the
        # leader cannot belong to it (its id was reused by some other session).
        return bool(session) and info.session == session and info.start_time >= self.leader_start

    def signal_all(self, sig: int) -> list[int]:
        """Send `sig` to every live process of the run; returns their pids."""
        pids = [p.pid for p in self.members()]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        return pids

    async def terminate(self, grace: float, kill_wait: float = 10.0) -> list[int]:
        """SIGTERM (then SIGCONT, so a paused process can act on it) every process of the
        run; after `grace` seconds SIGKILL whatever is left, again and again, until none is.
        Returns the pids that outlived `kill_wait` seconds of SIGKILL (none, but for a
        process stuck in the kernel)."""
        if not await self._signal(signal.SIGTERM):
            # None: nothing to wake or wait for. Every worker and every run ends here, and
            # each scan of /proc costs milliseconds on a busy host (issue 25).
            return []
        await self._signal(signal.SIGCONT)
        if await self._gone_within(grace):
            return []
        loop = asyncio.get_running_loop()
        deadline = loop.time() + kill_wait
        while loop.time() < deadline:
            if not await self._signal(signal.SIGKILL):
                return []
            await asyncio.sleep(POLL_SECONDS)
        return [p.pid for p in await asyncio.to_thread(self.members)]

    async def suspend(self, settle: float = 2.0) -> list[int]:
        """SIGSTOP every process of the run, rescanning until each is seen stopped (a child
        forked meanwhile is caught by the next scan). Returns the stopped pids."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + settle
        while True:
            members = await asyncio.to_thread(self.members)
            running = [p.pid for p in members if p.state not in STOPPED_STATES]
            if not running or loop.time() >= deadline:
                return [p.pid for p in members]
            for pid in running:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGSTOP)
            await asyncio.sleep(0.01)

    async def resume(self) -> list[int]:
        return await self._signal(signal.SIGCONT)

    async def _signal(self, sig: int) -> list[int]:
        return await asyncio.to_thread(self.signal_all, sig)

    async def _gone_within(self, seconds: float) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while await asyncio.to_thread(self.members):
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(POLL_SECONDS)
        return True


def session_is_theirs(leader: int, leader_start: int) -> bool:
    """Whether session id `leader` still names the session that process started at
    `leader_start` (clock ticks after boot; 0: not known, the id is trusted). The kernel gives
    no new process a pid that is still some process's session id, so the id outlives its
    leader as long as one member lives; once the pid names another live process, that session
    is over, and the id is the new process's (pids wrap around, at 32768 by default)."""
    if not leader:
        return False
    if not leader_start:
        return True
    info = process_info(leader)
    return info is None or info.start_time == leader_start


def process_info(pid: int | str) -> ProcessInfo | None:
    """/proc/<pid>/stat, read after the command name (which may hold spaces and
    parentheses): state is field 3, session 6, start time 22."""
    try:
        fields = _read(f"/proc/{pid}/stat", whole=False).rsplit(b")", 1)[1].split()
        return ProcessInfo(int(pid), fields[0].decode(), int(fields[3]), int(fields[19]))
    except (OSError, IndexError, ValueError):
        return None


def is_running(pid: int, start_time: str = "") -> bool:
    """Whether `pid` is a live (not zombie) process and, when `start_time` (its start time as
    recorded, e.g. in a run's job.pid) is given, still the one that started then: a pid
    reused since by another process is not it."""
    info = process_info(pid) if pid > 0 else None
    return (
        info is not None
        and info.state != "Z"
        and (not start_time or str(info.start_time) == start_time)
    )


def all_processes():
    """Every process /proc shows now, zombies included."""
    # Raw os calls, not pathlib: a scan runs every 50 ms while a run is being stopped, on
    # hosts with thousands of processes.
    for name in os.listdir("/proc"):
        if name.isdigit() and (info := process_info(name)) is not None:
            yield info


def sessions_holding(path: str | os.PathLike[str]) -> set[int]:
    """The process sessions of the live processes that have `path` open (a writer keeps its
    file open while it writes); empty when none does."""
    target = os.path.realpath(path)
    sessions = set()
    for info in all_processes():
        if info.state == "Z":
            continue
        folder = f"/proc/{info.pid}/fd"
        try:
            descriptors = os.listdir(folder)
        except OSError:  # gone, or another user's process
            continue
        for fd in descriptors:
            try:
                if os.readlink(f"{folder}/{fd}") == target:
                    sessions.add(info.session)
                    break
            except OSError:
                continue
    return sessions


def read_environ(pid: int) -> list[bytes]:
    """`pid`'s environment as NAME=value entries (OSError when gone or not ours)."""
    return _read(f"/proc/{pid}/environ").split(b"\0")


def _has_marker(pid: int, entry: bytes) -> bool:
    try:
        return entry in read_environ(pid)
    except OSError:  # gone, or another user's process
        return False


def _read(path: str, whole: bool = True) -> bytes:
    """The file's bytes; with whole=False one read (stat fits in one)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
            if not whole:
                break
        return b"".join(chunks)
    finally:
        os.close(fd)
