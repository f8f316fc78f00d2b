"""What `serve` and the web's parent (web_processes.py) share about the processes they start:
a child that ends with its parent, and the port file a web process writes once it listens."""

from __future__ import annotations

import ctypes
import os
import signal

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Runs in a child before exec (Popen's preexec_fn): if its parent is killed outright, the
    child gets SIGTERM rather than running on unsupervised."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def write_port_file(path: str, port: int | str) -> None:
    """Say the port, renamed into place: a reader never sees half a number."""
    partial = f"{path}.partial"
    with open(partial, "w") as handle:
        handle.write(str(port))
    os.replace(partial, path)
