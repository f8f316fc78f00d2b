"""Messages between the supervisor (runagentd) and a worker process, and
the pipe that carries them.

Every message is a small dict `{"t": <type>, ...}` pickled over a duplex
`multiprocessing.Pipe`. The supervisor reads each worker's end with `loop.add_reader`, so a
thousand idle workers cost no threads; EOF on the pipe means the other side is gone.
"""

from __future__ import annotations

import asyncio
from enum import StrEnum
from multiprocessing.connection import Connection


class Cmd(StrEnum):
    """Supervisor → worker."""

    STOP = "stop"
    PAUSE = "pause"
    RESUME = "resume"
    STEER = "steer"  # {context, urgency}
    SPAWN_RESPONSE = "spawn_response"  # {request_id, child_id} or {request_id, error}
    CHILD_STATUS = "child_status"  # {child_id, status, error?, replaced_by?}
    JOB_STATE = "job_state"  # {job_id, state, reason, exit_code} or {job_id, error}: SLURM's word


class Ev(StrEnum):
    """Worker → supervisor."""

    STARTED = "started"
    PAUSED = "paused"
    RESUMED = "resumed"
    DONE = "done"  # {result?}
    FAILED = "failed"  # {error, traceback}
    STOPPED = "stopped"
    SPAWN_REQUEST = "spawn_request"  # {request_id, cls_path, goal, config, scope}
    STOP_REQUEST = "stop_request"  # {target_id}
    EMIT = "emit"  # {kind, payload}: custom events (iteration, log_entry, ...)
    ITERATION = "iteration"  # {iteration}: progress counter stored on the agent
    WATCH_CHILDREN = "watch_children"  # {child_ids}: a resumed parent's children


TERMINAL_EVENTS = frozenset({Ev.DONE, Ev.FAILED, Ev.STOPPED})


class PipeChannel:
    """One end of a worker pipe, usable from asyncio without a thread."""

    def __init__(self, conn: Connection):
        self.conn = conn
        self.closed = False

    def send(self, message: dict) -> bool:
        """Send; False if the other side is gone (the caller learns it from EOF anyway)."""
        if self.closed:
            return False
        try:
            self.conn.send(message)
            return True
        except (BrokenPipeError, ConnectionResetError, EOFError, OSError):
            self.closed = True
            return False

    def drain(self) -> tuple[list[dict], bool]:
        """Every message already waiting, and whether the pipe reached EOF."""
        messages: list[dict] = []
        try:
            while self.conn.poll():
                messages.append(self.conn.recv())
        except (EOFError, OSError):
            self.closed = True
            return messages, True
        return messages, False

    async def recv(self) -> dict | None:
        """Next message, or None at EOF (for the worker side's single reader)."""
        loop = asyncio.get_running_loop()
        ready = asyncio.Event()
        fd = self.conn.fileno()
        loop.add_reader(fd, ready.set)
        try:
            while True:
                try:
                    if self.conn.poll():
                        return self.conn.recv()
                except (EOFError, OSError):
                    self.closed = True
                    return None
                ready.clear()
                await ready.wait()
        finally:
            loop.remove_reader(fd)

    def close(self) -> None:
        self.closed = True
        self.conn.close()
