"""runagentd's forkserver: the process its workers are forked from.

Started once, at the daemon's start: its preload (runtime_app.worker_boot) imports Django
once, so each worker starts in milliseconds. runagentd forks it from itself before any thread
starts (`fork_here`), its preload already imported there: a forkserver started the standard
way is a fresh interpreter that imports Django a second time (~0.5 CPU-s a daemon start, the
suite's 240 starts ~110 CPU-s). Stopped with SIGKILL at the daemon's end, after
its workers: a spare worker on its way (agentsys.spare_worker) waits in a thread for its pid
from the forkserver, which on a busy host may still be importing Django, and asyncio.run
waits for that thread at exit (seen: 5 s, past the 5 s a stop promises). Killed, the
forkserver's end of that pipe closes and the start ends at once. Nothing is forked from it
by then, and the workers it forked are session leaders of their own: they do not die with it.
"""

from __future__ import annotations

import contextlib
import importlib
import multiprocessing
import os
import signal
import socket
import threading
from multiprocessing import connection, forkserver, resource_tracker, util


def start(preload: tuple[str, ...]):
    """The forkserver context, its server started (not waiting for its preload): (context,
    pid). Blocking: call it in a thread."""
    context = multiprocessing.get_context("forkserver")
    if preload:
        context.set_forkserver_preload(list(preload))
    forkserver.ensure_running()
    return context, forkserver._forkserver._forkserver_pid


def stop() -> None:
    """Kill the forkserver, if one runs (the module docstring says why not more gently), and
    reap it: a zombie still looks alive to the embedded PostgreSQL's leases
    (researchagent.embedded_db), and the last process out would leave the server running."""
    pid = forkserver._forkserver._forkserver_pid
    if not pid:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def fork_here(preload: tuple[str, ...]) -> int | None:
    """Import `preload` in this process, then fork the forkserver from it: `start` then finds
    it running. Only while this process has one thread (a fork copies no other thread, and a
    lock one held stays locked in the child); returns the forkserver's pid, or None where
    that is not so (`start` then spawns one the standard way)."""
    server = forkserver._forkserver
    if threading.active_count() > 1 or server._forkserver_pid is not None:
        return None
    for name in preload:
        importlib.import_module(name)
    resource_tracker.ensure_running()  # as `ensure_running` does: each worker gets its fd
    with socket.socket(socket.AF_UNIX) as listener:
        address = connection.arbitrary_address("AF_UNIX")
        listener.bind(address)
        if not util.is_abstract_socket_namespace(address):
            os.chmod(address, 0o600)
        listener.listen()
        # Every worker holds the write end of "alive": when the daemon and all of them are
        # gone, the forkserver reads EOF and leaves.
        alive_r, alive_w = os.pipe()
        keep = (listener.fileno(), alive_r)  # a worker gets the tracker's fd with its start
        pid = os.fork()
        if pid == 0:  # the forkserver: nothing of the daemon's but what a spawned one gets
            try:
                _close_all_but(*keep)
                forkserver.main(listener.fileno(), alive_r, [])
            finally:
                os._exit(0)
        os.close(alive_r)
    server._forkserver_address = address
    server._forkserver_alive_fd = alive_w
    server._forkserver_pid = pid
    return pid


def _close_all_but(*keep: int) -> None:
    """Close every descriptor but stdin/out/err and `keep`: the daemon's database socket, its
    lease files and its end of "alive" must not live on in the forkserver and its workers."""
    low = 3
    for fd in sorted(fd for fd in keep if fd >= low):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, os.sysconf("SC_OPEN_MAX"))
