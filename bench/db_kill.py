"""The issue-34 chaos case, as `make run` meets it: `manage.py serve` with the demo model, the
demo research loop (`make demo`) and RUNS runs going, then `kill -9` of the embedded
PostgreSQL's postmaster.

- db_kill_to_first_201_s: SIGKILL to the first 201 of POST /api/runs (goal: 5 s).
- db_kill_runs_not_done: of the RUNS runs and the one made after the kill, how many did not
  end `done` (0: nothing lost).
- db_kill_runs_started_twice: how many ran their command more than once (0).
- db_kill_loop_going_at_the_kill: 1 when the loop had not ended when the postmaster died.
- db_kill_loop_done: 1 when the research loop ran to `done` through it all.

The counts are read from the rows of the runs the bench made and of its loop, through the API
(and the runs' own notes of each start), by the functions below that
tests/integration/test_bench_db_kill_points.py checks.
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agentsys.types import TERMINAL_AGENT_STATUSES
from bench._report import report
from bench.harness import REPO

RUNS = 50
OPEN = ("queued", "running", "paused")  # a run not ended yet (scheduler_app's RunStatus.open())
TOKEN = "bench-db-kill"  # noqa: S105 (a bench's own)
PYTHON = sys.executable


class Console:
    """A child's output, collected on a thread."""

    def __init__(self, process: subprocess.Popen):
        self.lines: list[str] = []
        threading.Thread(target=self._read, args=(process.stdout,), daemon=True).start()

    def _read(self, stream):
        for line in stream:
            self.lines.append(line.rstrip("\n"))

    def has(self, text: str) -> bool:
        return any(text in line for line in self.lines)


def wait(predicate, timeout: float, what: str, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(interval)
    raise RuntimeError(f"timed out after {timeout}s waiting for {what}")


def started(env: dict, *args: str) -> tuple[subprocess.Popen, Console]:
    process = subprocess.Popen(
        [PYTHON, "manage.py", *args],
        cwd=REPO,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    return process, Console(process)


def created(client: httpx.Client, body: dict) -> str | None:
    try:
        response = client.post("/api/runs", json=body)
    except httpx.TransportError:
        return None
    return response.json()["id"] if response.status_code == 201 else None


def ended(client: httpx.Client, ids: list[str]) -> list[dict] | None:
    runs = [client.get(f"/api/runs/{run_id}").json() for run_id in ids]
    return runs if all(run.get("status") not in OPEN for run in runs) else None


def chaos_run(starts: Path, index: int, seconds: float = 3) -> dict:
    """The body of run `index`: each start of its command adds a line to starts/<index>."""
    return {
        "name": "chaos",
        "command": f"echo x >> {starts}/{index}; sleep {seconds:g}",
        "auto_start": True,
    }


def runs_not_done(runs: list[dict]) -> int:
    """Of `runs` (the bench's, as GET /api/runs/{id} answers each), those not `done`."""
    return sum(run["status"] != "done" for run in runs)


def started_twice(starts: Path) -> int:
    """Runs whose command wrote more than one line in its file of `starts`."""
    return sum(path.read_text().count("x") > 1 for path in starts.iterdir())


def loop_id_of(console: Console) -> str:
    """The id `manage.py research start` said it started."""
    found = [line.split()[2] for line in console.lines if line.startswith("research loop ")]
    return found[0]


def loop_status(client: httpx.Client, loop_id: str) -> str:
    """The loop's status, from its row (GET /api/research/{id})."""
    return client.get(f"/api/research/{loop_id}").json()["status"]


def chaos(home: Path, port: int, starts: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "AGENTSYS_WORKDIR")}
    env.update(
        AGENTSYS_HOME=str(home),
        PORT=str(port),
        MODEL_PROVIDER="demo",
        RESEARCH_AGENT_USER_AUTH_TOKEN=TOKEN,
        AGENTSYS_HOST_NAME="bench-db-kill",
        AGENTSYS_DEMO_SECONDS="0",  # the demo loop as fast as it goes: the kill is the case
    )
    serve, console = started(env, "serve")
    try:
        wait(lambda: console.has("Ctrl-C stops everything"), 300, "serve's banner")
        loop, loop_console = started(env, "research", "start", "--follow", "--timeout", "900")
        wait(lambda: loop_console.has("started in"), 120, "the loop to start")
        client = httpx.Client(
            base_url=f"http://127.0.0.1:{port}", headers={"X-Auth-Token": TOKEN}, timeout=60
        )
        ids = [created(client, chaos_run(starts, i)) for i in range(RUNS)]
        assert all(ids), ids
        wait(lambda: len(list(starts.iterdir())) >= 10, 120, "runs to start")
        pid = int((home / "pgdata" / "postmaster.pid").read_text().split()[0])
        loop_id = loop_id_of(loop_console)
        going = loop_status(client, loop_id) not in TERMINAL_AGENT_STATUSES  # just before the kill
        os.kill(pid, signal.SIGKILL)
        killed = time.monotonic()
        report("db_kill_loop_going_at_the_kill", float(going), "bool")
        after = wait(
            lambda: created(client, {"name": "after", "command": "true", "auto_start": True}),
            60,
            "a 201",
            0.02,
        )
        report("db_kill_to_first_201_s", time.monotonic() - killed, "s")
        for line in console.lines:  # where the time went, for a person reading the figure
            if "PostgreSQL" in line or "database" in line:
                print(line, file=sys.stderr)
        runs = wait(lambda: ended(client, [*ids, after]), 600, "every run to end", 1.0)
        report("db_kill_runs_not_done", runs_not_done(runs), "runs")
        report("db_kill_runs_started_twice", started_twice(starts), "runs")
        loop.wait(900)  # its follower ends with the loop (or its own timeout)
        report("db_kill_loop_done", float(loop_status(client, loop_id) == "done"), "bool")
        if loop.returncode != 0:
            print("\n".join(loop_console.lines[-20:]), file=sys.stderr)
    finally:
        serve.send_signal(signal.SIGINT)
        serve.wait(120)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def main() -> None:
    folder = Path(tempfile.mkdtemp(prefix="agentsys-bench-dbkill-"))
    folder.chmod(0o755)  # as root the server runs as another user, who must reach its data
    starts = folder / "starts"
    starts.mkdir()
    try:
        chaos(folder / "home", free_port(), starts)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
