"""Reaping the orphans runagentd adopts as a subreaper, without stealing a child's exit status
from whoever waits for it.

runagentd is a child subreaper: a shell whose worker died is re-parented to it and must be
reaped, or it stays a zombie. But runagentd has children of its own too: the runs its
executors start (an executor runs inside runagentd) are awaited by asyncio, and programs
started from threads (git, nvidia-smi) by `subprocess`. A blanket `waitpid(-1)` would take
their exit statuses first. So only zombies among the main thread's children are reaped
(re-parented orphans land there; a thread's own children are listed under that thread), and
not those registered here as awaited.
"""

from __future__ import annotations

import contextlib
import os

_awaited: set[int] = set()


def awaited(pid: int) -> None:
    """`pid`, a child of this process, is waited for by its starter: leave it to them.
    Call on the thread that started it, before anything else can run on it."""
    _awaited.add(pid)


def no_longer_awaited(pid: int) -> None:
    _awaited.discard(pid)


def reap(keep: set[int] | frozenset[int] = frozenset()) -> int:
    """Reap the zombie children of the main thread that nobody awaits (and not `keep`);
    returns how many."""
    reaped = 0
    for pid in _main_thread_children():
        if pid in _awaited or pid in keep or not _is_zombie(pid):
            continue
        with contextlib.suppress(ChildProcessError):
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                reaped += 1
    return reaped


def _main_thread_children() -> list[int]:
    own = os.getpid()
    try:
        with open(f"/proc/{own}/task/{own}/children", "rb") as listing:
            return [int(pid) for pid in listing.read().split()]
    except OSError:  # a kernel without the listing: reap nothing rather than steal
        return []


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except (OSError, IndexError):
        return False
