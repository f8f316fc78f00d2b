"""runagentd's forkserver: the process its workers are forked from.

Started once, at the daemon's start: its preload (runtime_app.worker_boot) imports Django
once, so each worker starts in milliseconds. Stopped with SIGKILL at the daemon's end, after
its workers: a spare worker on its way (agentsys.spare_worker) waits in a thread for its pid
from the forkserver, which on a busy host may still be importing Django, and asyncio.run
waits for that thread at exit (seen: 5 s, past the 5 s a stop promises). Killed, the
forkserver's end of that pipe closes and the start ends at once. Nothing is forked from it
by then, and the workers it forked are session leaders of their own: they do not die with it.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
from multiprocessing import forkserver


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
