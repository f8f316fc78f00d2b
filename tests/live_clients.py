"""A real daphne for end-to-end tests, and clients that follow its event stream the way a
browser does: a WebSocket client and an SSE (EventSource-like) client, each reconnecting by
itself with the last id it saw, each recording what arrived and when."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import httpx
from websockets.asyncio.client import connect

from tests.helpers import PYTHON, REPO, child_env, database_url_of_current_connection, wait_until

TOKEN = "e2e-token-0123456789abcdef0123456789"
RECONNECT_DELAY = 0.2


class Web:
    """The web process (researchagent.webserver: daphne) serving the project against the test
    database. stop() expects it gone within its stop deadline, whatever is in flight."""

    def __init__(self, port: int = 0, *, stderr=subprocess.DEVNULL, processes: int = 1, **env: str):
        """port 0: a free one, chosen by daphne as it binds (a port picked beforehand may be
        taken by another test's server before daphne binds it). processes > 1: that many
        web processes on the port, under one parent (researchagent.web_processes)."""
        self.env = env
        port_file = Path(tempfile.mkdtemp(prefix="web-port-")) / "port"
        argv = [
            PYTHON,
            "-m",
            "researchagent.webserver",
            "-p",
            str(port),
            "--port-file",
            str(port_file),
        ]
        self.process = subprocess.Popen(
            [*argv, "--processes", str(processes)],
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env=child_env(
                DATABASE_URL=database_url_of_current_connection(),
                RESEARCH_AGENT_USER_AUTH_TOKEN=TOKEN,
                LOG_LEVEL="WARNING",
                **env,
            ),
        )
        wait_until(lambda: self._listening(port_file), 30, message="daphne to listen")
        self.port = int(port_file.read_text())
        shutil.rmtree(port_file.parent, ignore_errors=True)

    def _listening(self, port_file: Path) -> bool:
        if self.process.poll() is not None:
            raise RuntimeError(
                f"the web process exited ({self.process.returncode}) before listening"
            )
        return port_file.exists()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> float:
        """SIGTERM; returns the seconds it took to exit (TimeoutExpired past 10)."""
        started = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(10)
        return time.monotonic() - started


class Follower(threading.Thread):
    """Follows /ws/agents/events/ ("ws") or /api/agents/events ("sse") from the start of the
    stream in a thread of its own, reconnecting after any failure with the last id seen."""

    def __init__(self, kind: str, port: int):
        super().__init__(name=f"follower-{kind}", daemon=True)
        assert kind in ("ws", "sse")
        self.kind, self.port = kind, port
        self.received: list[tuple[float, dict]] = []  # (time.monotonic() on arrival, message)
        self.connections = 0  # connections that were answered and streamed
        self.failures: list[str] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task | None = None
        self._ready = threading.Event()

    @property
    def last_id(self) -> int:
        return self.received[-1][1]["id"] if self.received else 0

    def ids(self) -> list[int]:
        return [message["id"] for _, message in self.received]

    def first_arrival_after(self, moment: float) -> float | None:
        return next((at for at, _ in self.received if at > moment), None)

    def run(self) -> None:
        asyncio.run(self._main())

    def start(self) -> Follower:
        super().start()
        self._ready.wait(5)
        return self

    def stop(self) -> None:
        if self._loop is not None and self._task is not None:
            self._loop.call_soon_threadsafe(self._task.cancel)
        self.join(10)

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        self._ready.set()
        with contextlib.suppress(asyncio.CancelledError):
            while True:
                try:
                    await (self._follow_ws() if self.kind == "ws" else self._follow_sse())
                    self.failures.append("stream ended")
                except asyncio.CancelledError:
                    raise
                except Exception as error:
                    self.failures.append(repr(error)[:200])
                await asyncio.sleep(RECONNECT_DELAY)

    def _record(self, message: dict) -> None:
        self.received.append((time.monotonic(), message))

    async def _follow_ws(self) -> None:
        url = f"ws://127.0.0.1:{self.port}/ws/agents/events/?after={self.last_id}"
        async with connect(
            url,
            additional_headers={"X-Auth-Token": TOKEN},
            origin=f"http://127.0.0.1:{self.port}",
            open_timeout=5,
        ) as ws:
            self.connections += 1
            async for frame in ws:
                self._record(json.loads(frame))

    async def _follow_sse(self) -> None:
        headers = {"X-Auth-Token": TOKEN, "Last-Event-ID": str(self.last_id)}
        timeout = httpx.Timeout(5, read=60)
        async with (
            httpx.AsyncClient(timeout=timeout) as client,
            client.stream(
                "GET", f"http://127.0.0.1:{self.port}/api/agents/events", headers=headers
            ) as response,
        ):
            if response.status_code != 200:
                raise RuntimeError(f"answered {response.status_code}")
            self.connections += 1
            data = None
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    data = json.loads(line[6:])
                elif line == "" and data is not None:
                    self._record(data)
                    data = None
