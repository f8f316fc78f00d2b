"""Several web processes on one port: `python -m researchagent.webserver --processes N`.

One daphne process is bound by Python's GIL to one core: POST /api/runs from 20 scripts at
once kept it busy at ~130 runs/s with other cores idle (issue 25). Here N web processes
(researchagent.webserver, each as it runs alone) listen on the same address with SO_REUSEPORT, and
the kernel spreads new connections over them. A page's WebSocket, an event stream and a
request need nothing shared in memory: sessions, the channel layer and the MCP endpoint
(stateless) all live in PostgreSQL or in the request itself.

This process only holds the port and watches its children:
- the port: a socket bound with SO_REUSEPORT and never listening (a listening one would be
  handed connections it never accepts), so that `-p 0` names one port for all of them and no
  other program takes it between a child's restart and the next;
- SIGTERM or SIGINT: passed on to every child, each of which stops as it does alone (drain,
  then a deadline); leftovers are killed after that deadline;
- a child that exits on its own: the others are stopped and this process exits with its
  status, so that whoever supervises the web (`manage.py serve`) restarts it whole, with its
  crash backoff, rather than a half-size web lingering.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import time

from researchagent.child_process import die_with_parent, write_port_file

logger = logging.getLogger("agentsys.web")

POLL_SECONDS = 0.1


def listening_socket(host: str, port: int, *, listen: bool) -> socket.socket:
    """A TCP socket on (host, port) with SO_REUSEPORT, listening if `listen` (non-blocking,
    as twisted adopts it)."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
        if listen:
            sock.listen(1024)
            sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


class WebProcesses:
    def __init__(self, options, count: int, stop_deadline: float):
        self.options, self.count, self.stop_deadline = options, count, stop_deadline
        self.children: list[subprocess.Popen] = []
        self.stop_requested_at: float | None = None
        self.port_holder: socket.socket | None = None
        self.port_file_written = False

    def run(self) -> int:
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._on_signal)
        try:
            self.port_holder = listening_socket(self.options.bind, self.options.port, listen=False)
        except OSError as error:
            print(f"cannot bind {self.options.bind}:{self.options.port}: {error}", file=sys.stderr)
            return 1
        port = self.port_holder.getsockname()[1]
        for index in range(self.count):
            self.children.append(self._spawn(port, index))
        return self._watch()

    def _spawn(self, port: int, index: int) -> subprocess.Popen:
        argv = [sys.executable, "-m", "researchagent.webserver", "-b", self.options.bind]
        argv += ["-p", str(port), "--reuse-port"]
        if self.options.access_log:
            argv += ["--access-log", self.options.access_log]
        if self.options.port_file:
            argv += ["--port-file", self._child_port_file(index)]
        return subprocess.Popen(argv, preexec_fn=die_with_parent)

    def _child_port_file(self, index: int) -> str:
        return f"{self.options.port_file}.{index}"

    def _say_listening_once_all_are(self) -> None:
        """The port file is written once every child listens: a client that connects once
        it appears is not left on the only process up (a kept-alive connection stays where
        it was accepted)."""
        if not self.options.port_file or self.port_file_written:
            return
        ready = [os.path.exists(self._child_port_file(i)) for i in range(self.count)]
        if not all(ready):
            return
        with open(self._child_port_file(0)) as handle:
            port = handle.read()
        write_port_file(self.options.port_file, port)
        for index in range(self.count):
            os.unlink(self._child_port_file(index))
        self.port_file_written = True

    def _on_signal(self, signum, frame) -> None:
        if self.stop_requested_at is not None:
            return
        self.stop_requested_at = time.monotonic()
        self._close_port_holder()
        for child in self.children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)

    def _close_port_holder(self) -> None:
        if self.port_holder is not None:
            self.port_holder.close()
            self.port_holder = None

    def _watch(self) -> int:
        while self.stop_requested_at is None:
            exited = [child for child in self.children if child.poll() is not None]
            if exited:
                code = exited[0].returncode
                logger.error(
                    "web process %d exited (status %s); stopping the other web processes",
                    exited[0].pid,
                    code,
                )
                self._on_signal(signal.SIGTERM, None)
                self._wait_children()
                return code if code > 0 else 1
            self._say_listening_once_all_are()
            time.sleep(POLL_SECONDS)
        return self._wait_children()

    def _wait_children(self) -> int:
        """Each child stops within its own deadline; one that has not by a second past it
        is killed. The worst status is this process's."""
        deadline = self.stop_requested_at + self.stop_deadline + 1.0
        codes = []
        for child in self.children:
            try:
                codes.append(child.wait(max(0.0, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                child.kill()
                codes.append(child.wait())
        self._close_port_holder()
        return max((code if code >= 0 else 128 - code for code in codes), default=0)
