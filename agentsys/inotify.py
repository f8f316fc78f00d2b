"""Linux inotify through ctypes on libc: an fd that becomes readable when a watched directory
changes, read without blocking (so runagentd's event loop can watch it with add_reader).

No package for it: the one installed (watchfiles) runs a thread per watcher, and runagentd
hosts many runs. Where inotify is missing (not Linux, no libc symbol), `available()` says so
and callers poll instead.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import struct
from dataclasses import dataclass

IN_MODIFY = 0x002
IN_CLOSE_WRITE = 0x008
IN_MOVED_TO = 0x080
IN_CREATE = 0x100
IN_DELETE_SELF = 0x400
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
IN_ONLYDIR = 0x01000000
IN_ISDIR = 0x40000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC

# What a metric source's writer does: appends (modify), new files and directories (create),
# files written whole and renamed into place (moved_to, as MLflow's meta.yaml).
CHANGES = IN_MODIFY | IN_CLOSE_WRITE | IN_CREATE | IN_MOVED_TO | IN_DELETE_SELF | IN_ONLYDIR

_HEADER = struct.Struct("iIII")  # wd, mask, cookie, len: struct inotify_event before its name
_READ_SIZE = 64 * 1024


@dataclass(frozen=True)
class Event:
    wd: int
    mask: int
    name: str

    @property
    def is_dir(self) -> bool:
        return bool(self.mask & IN_ISDIR)


@functools.cache
def _libc():
    # The process's own symbols (CPython links libc): find_library would run ldconfig.
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.inotify_init1.argtypes = [ctypes.c_int]
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    except (OSError, AttributeError):
        return None
    return libc


def available() -> bool:
    return _libc() is not None


class Inotify:
    """One inotify instance. Every method is non-blocking; `close` once, when done."""

    def __init__(self) -> None:
        libc = _libc()
        if libc is None:
            raise OSError(errno.ENOSYS, "inotify is not available")
        fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))
        self.fd = fd
        self._libc = libc

    def add_watch(self, path: str, mask: int = CHANGES) -> int:
        """The watch descriptor of `path` (the same one again for a path watched already).
        Raises OSError: ENOENT (gone meanwhile), ENOSPC (the user's watch limit), ..."""
        wd = self._libc.inotify_add_watch(self.fd, os.fsencode(path), mask)
        if wd < 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code), path)
        return wd

    def read(self) -> list[Event]:
        """Every event queued now; [] when none is."""
        events: list[Event] = []
        while True:
            try:
                data = os.read(self.fd, _READ_SIZE)
            except (BlockingIOError, InterruptedError):
                return events
            if not data:
                return events
            events.extend(parse(data))

    def close(self) -> None:
        os.close(self.fd)


def parse(data: bytes) -> list[Event]:
    events = []
    offset = 0
    while offset + _HEADER.size <= len(data):
        wd, mask, _cookie, length = _HEADER.unpack_from(data, offset)
        offset += _HEADER.size
        raw = data[offset : offset + length].split(b"\0", 1)[0]
        offset += length
        events.append(Event(wd, mask, os.fsdecode(raw)))
    return events
