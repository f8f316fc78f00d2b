"""The web process: daphne serving researchagent.asgi, gone within STOP_DEADLINE_SECONDS of
SIGTERM or SIGINT whatever its requests are doing. `python -m researchagent.webserver --port N`.

Plain daphne waits for every request on its way out: it cancels the application tasks and then
waits for them, and a sync view (a query, an HTTP call to OpenCode) cannot be cancelled, so its
task waits for its thread; at interpreter exit the executor threads are joined too, and a thread
that called back into the stopped event loop never returns. One request in flight could keep
daphne alive for good.

The stop here, in order:
1. Stop listening: no new connection is accepted.
2. Drain (common.draining): every event stream (SSE, NDJSON chat, WebSocket) ends
   cleanly where it is, and its client resumes from the last id it saw once a server answers.
3. Once no request is in flight, or after DRAIN_SECONDS, stop the reactor, cancelling what is
   left (and waiting CANCEL_WAIT_SECONDS at most for it).
4. Release this process's database lease, flush the logs, and leave with os._exit: a thread
   still blocked in a sync view is abandoned, not joined. Its connection to PostgreSQL closes
   with the process, and the server rolls back whatever it had open.
A watchdog thread does step 4 at STOP_DEADLINE_SECONDS if steps 1-3 have not returned by then.
"""

from __future__ import annotations

# daphne.server installs Twisted's asyncio reactor: it must be imported before anything else
# that imports Twisted.
import daphne.server  # isort:skip

import argparse
import asyncio
import logging
import os
import signal
import sys
import threading
import time

from daphne.access import AccessLogGenerator
from daphne.endpoints import build_endpoint_description_strings
from twisted.internet import defer, reactor

from common import draining
from researchagent.child_process import write_port_file

DRAIN_SECONDS = 1.5
CANCEL_WAIT_SECONDS = 0.6
STOP_DEADLINE_SECONDS = 2.5
EXIT_CODE_ABANDONED = 3  # the watchdog had to end it: something in flight ignored the stop

logger = logging.getLogger("agentsys.web")


class StoppableServer(daphne.server.Server):
    """daphne's Server that keeps its listening ports, so that a stop can close them first,
    and whose last step before the reactor stops is bounded."""

    port_file: str | None = None
    adopted_socket = None  # with --reuse-port: the socket bound here, handed to twisted

    def listen_success(self, port):
        self.ports = [*getattr(self, "ports", []), port]
        result = super().listen_success(port)
        if self.port_file:
            # Written once listening (rename: a reader never sees half a number). Whoever
            # started this process learns the port it chose (-p 0) and that this process, not
            # another that took the port meanwhile, is the one listening on it.
            write_port_file(self.port_file, port.getHost().port)
        return result

    def listen_on_adopted_socket(self) -> None:
        """With --reuse-port (daphne's ready callback, once its factories exist): listen on
        the socket bound here, whatever its address family ("fd:" endpoints take INET only)."""
        from twisted.internet.endpoints import AdoptedStreamServerEndpoint

        # The endpoint listens on a copy and closes this descriptor: nothing else may, or
        # the kernel would keep handing it connections after the copy closes at the stop.
        family, fileno = self.adopted_socket.family, self.adopted_socket.detach()
        endpoint = AdoptedStreamServerEndpoint(reactor, fileno, family)
        listener = endpoint.listen(self.http_factory)
        listener.addCallback(self.listen_success)
        listener.addErrback(self.listen_error)
        self.listeners.append(listener)

    def applications_running(self) -> list[asyncio.Future]:
        return [
            details["application_instance"]
            for details in self.connections.values()
            if details.get("application_instance") is not None
            and not details["application_instance"].done()
        ]

    def kill_all_applications(self):
        """daphne's version cancels each application once and waits for all of them. A sync
        view's task does not end on that cancel: asgiref then joins the request's thread, which
        may be blocked in a query or an HTTP call. Cancel again (that interrupts the join) and
        give up waiting at CANCEL_WAIT_SECONDS; os._exit abandons what is left."""
        return defer.Deferred.fromFuture(asyncio.ensure_future(self._cancel_all()))

    async def _cancel_all(self) -> None:
        pending = self.applications_running()
        deadline = time.monotonic() + CANCEL_WAIT_SECONDS
        while pending and time.monotonic() < deadline:
            for application in pending:
                application.cancel()
            await asyncio.wait(pending, timeout=0.2)
            pending = [application for application in pending if not application.done()]
        if pending:
            logger.warning("%d request(s) ignored the cancel; abandoning them", len(pending))


class WebProcess:
    def __init__(self, server: StoppableServer):
        self.server = server
        self.stop_requested_at: float | None = None

    def run(self) -> int:
        loop = reactor._asyncioEventloop
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self.begin_stop, signum)
        self.server.run()
        if self.server.abort_start:
            return 1
        return 0

    def begin_stop(self, signum: int) -> None:
        if self.stop_requested_at is not None:
            return  # a second Ctrl-C changes nothing: the deadline already holds
        self.stop_requested_at = time.monotonic()
        logger.info("%s: stopping the web server", signal.Signals(signum).name)
        threading.Thread(target=self._watchdog, name="stop-watchdog", daemon=True).start()
        for port in getattr(self.server, "ports", []):
            port.stopListening()
        draining.begin_draining()
        reactor.callLater(0.05, self._stop_when_idle)

    def _stop_when_idle(self) -> None:
        waited = time.monotonic() - self.stop_requested_at
        if self.server.applications_running() and waited < DRAIN_SECONDS:
            reactor.callLater(0.05, self._stop_when_idle)
            return
        self.server.stop()

    def _watchdog(self) -> None:
        time.sleep(STOP_DEADLINE_SECONDS)
        threads = [t.name for t in threading.enumerate() if t is not threading.current_thread()]
        logger.error(
            "the web server did not stop within %.1fs of the signal; leaving anyway (threads: %s)",
            STOP_DEADLINE_SECONDS,
            ", ".join(threads),
        )
        leave(EXIT_CODE_ABANDONED)


def leave(code: int) -> None:
    """Exit now, without joining threads a sync view may still block."""
    from django.conf import settings

    try:
        if settings.EMBEDDED_POSTGRES is not None:
            settings.EMBEDDED_POSTGRES.release()
    except Exception:  # the lease of a dead process is swept anyway; never block an exit
        logger.exception("could not release the database lease")
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def parse_arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m researchagent.webserver")
    parser.add_argument("-b", "--bind", default="127.0.0.1", help="Address to listen on")
    parser.add_argument("-p", "--port", type=int, default=8000, help="0: any free port")
    parser.add_argument(
        "--port-file", default=None, help="Write the port listened on to this file once listening"
    )
    parser.add_argument(
        "--access-log", default=None, help="Log a line per request to this file ('-': stdout)"
    )
    parser.add_argument(
        "--processes",
        type=int,
        default=1,
        help="Web processes sharing the port (researchagent.web_processes); 1: this one alone",
    )
    parser.add_argument(
        "--reuse-port",
        action="store_true",
        help="Listen with SO_REUSEPORT, beside the other web processes on the port",
    )
    options = parser.parse_args(argv)
    if not 1 <= options.processes <= 64:
        parser.error("--processes: from 1 to 64")
    return options


def main(argv: list[str] | None = None) -> None:
    options = parse_arguments(sys.argv[1:] if argv is None else argv)
    if options.processes > 1:
        from researchagent.web_processes import WebProcesses

        sys.exit(WebProcesses(options, options.processes, STOP_DEADLINE_SECONDS).run())
    os.environ.setdefault("AGENTSYS_WEB_DB_POOL", "1")  # researchagent.settings.WEB_POOL_VARIABLE
    from common import db_watch
    from researchagent.asgi import application  # sets Django up (and its LOGGING)

    db_watch.start()  # so that no request waits on a database known to be away

    logging.getLogger("daphne").setLevel(logging.WARNING)  # its start-up lines are noise here

    access_log = None
    if options.access_log == "-":
        access_log = AccessLogGenerator(sys.stdout)
    elif options.access_log:
        access_log = AccessLogGenerator(open(options.access_log, "a", 1))  # noqa: SIM115
    adopted = None
    endpoints = build_endpoint_description_strings(host=options.bind, port=options.port)
    if options.reuse_port:
        from researchagent.web_processes import listening_socket

        try:
            adopted = listening_socket(options.bind, options.port, listen=True)
        except OSError as error:
            print(f"cannot listen on {options.bind}:{options.port}: {error}", file=sys.stderr)
            leave(1)
    server = StoppableServer(
        application=application,
        endpoints=endpoints,
        signal_handlers=False,
        action_logger=access_log,
        verbosity=0,
    )
    server.port_file = options.port_file
    if adopted is not None:  # daphne refuses to be made without endpoints: emptied here
        server.endpoints, server.adopted_socket = [], adopted
        server.ready_callable = server.listen_on_adopted_socket
    leave(WebProcess(server).run())


if __name__ == "__main__":
    main()
