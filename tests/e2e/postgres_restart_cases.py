"""PostgreSQL restarts under load, with real processes: a runagentd hosting an agent and two
GPU runs that write metrics, a daphne, and a WebSocket and an SSE client following the
event stream. The database is restarted, then kept down for a while, then brought back.

Everything must recover by itself within 10 s of the database's return (the daemon heart-
beats, the clients receive new events); nothing is lost or stored twice (event streams stay
gap-free, every metrics row and the alert are stored once, a run that ended during the outage
records its exit code); the runs' processes outlive the outage; the queue goes on; while the
database is down the web answers 503 with a clear message.

These cases restart the database server their pytest runs on, so they never run on the one
the suite's workers share: tests/e2e/test_postgres_restart.py runs them in a child pytest on an
embedded PostgreSQL of its own (restarted through researchagent.embedded_db), and again on the
system PostgreSQL (AGENTSYS_TEST_PG_CTL names how to control it, e.g. "pg_ctlcluster 15 main").
Not named test_*.py: the suite does not collect them itself.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psycopg
import pytest
from django.conf import settings
from django.db import InterfaceError, OperationalError, connection
from django.utils import timezone

from agents_app.models import Agent
from agents_app.services import request_agent_command, request_agent_start
from agentsys.types import AgentStatus, CommandKind
from events_app.models import Event
from hosts_app.models import Host
from scheduler_app.models import Alert, MetricPoint, Run, RunLogChunk, RunStatus
from scheduler_app.runs.launch import create_run
from tests.helpers import PYTHON, pid_alive, wait_until
from tests.live_clients import TOKEN, Follower, Web
from tests.runtime_harness import A, DaemonProcess

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

RECOVERY_SECONDS = 10.0  # the promise: everything works again this long after the DB is back
# Long enough for several heartbeats and a run to end unrecorded; set 30 to try a long one.
OUTAGE_SECONDS = float(os.environ.get("AGENTSYS_TEST_OUTAGE_SECONDS", "4"))

# A training script: a metrics row every 50 ms until told to finish; one NaN loss when told.
TRAIN = """
import json, os, sys, time
from pathlib import Path
control = Path(sys.argv[1])
out = open(Path(os.environ["AGENTSYS_RUN_DIR"]) / "agent_metrics.jsonl", "a")
step, nan_written = 0, False
while not (control / "finish").exists():
    step += 1
    loss = 1.0 / step
    if (control / "nan").exists() and not nan_written:
        loss, nan_written = float("nan"), True
    out.write(json.dumps({"_step": step, "loss": loss}) + "\\n")
    out.flush()
    (control / "steps").write_text(str(step))
    print(f"tick {step}", flush=True)  # its log, shipped to the database through the outage
    time.sleep(0.05)
sys.exit(int(sys.argv[2]))
"""


class Postgres:
    """Stops and starts the database the suite runs on."""

    def __init__(self):
        self.embedded = settings.EMBEDDED_POSTGRES
        self.ctl = shlex.split(os.environ.get("AGENTSYS_TEST_PG_CTL", ""))

    @property
    def controllable(self) -> bool:
        return self.embedded is not None or bool(self.ctl)

    def stop(self) -> None:
        if self.embedded is not None:
            self.embedded.stop_server()
        else:
            subprocess.run([*self.ctl, "stop", "-m", "fast"], check=True, timeout=60)

    def start(self) -> None:
        if self.embedded is not None:
            self.embedded.start_server()
        else:
            subprocess.run([*self.ctl, "start"], check=True, timeout=60)

    def up(self) -> bool:
        try:
            psycopg.connect(**_params(), connect_timeout=2).close()
            return True
        except psycopg.OperationalError:
            return False


def _params() -> dict:
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    return params


def query(fn):
    """Run an ORM read in the test process, or None while the database cannot answer (the
    test's own connection breaks with the server like everyone's)."""
    try:
        return fn()
    except (OperationalError, InterfaceError):
        connection.close()
        return None


def wait_for(fn, timeout: float, message: str):
    return wait_until(lambda: query(fn), timeout, interval=0.05, message=message)


class Training:
    """One run of TRAIN, controlled through files."""

    started: list[Training] = []  # finished at teardown, so a failed test leaves none running

    def __init__(self, tmp: Path, name: str, exit_code: int = 0):
        self.control = tmp / f"{name}-control"
        self.control.mkdir()
        Training.started.append(self)
        script = tmp / "train.py"
        script.write_text(TRAIN)
        self.run = create_run(
            name=name,
            command=f"{PYTHON} {script} {self.control} {exit_code}",
            workdir=str(tmp),
            gpu_required=1,
            auto_start=True,
        )
        self.run_dir = Path(self.run.run_dir)

    def refresh(self) -> Run:
        return Run.objects.get(pk=self.run.pk)

    @property
    def steps(self) -> int:
        try:
            return int((self.control / "steps").read_text())
        except (OSError, ValueError):
            return 0

    def process_pid(self) -> int:
        return int((self.run_dir / "job.pid").read_text().split()[0])

    def stored_steps(self) -> list[int]:
        points = MetricPoint.objects.filter(series__run=self.run.pk, series__key="loss")
        return sorted(points.values_list("step", flat=True))

    def file_steps(self) -> list[int]:
        import json

        lines = (self.run_dir / "agent_metrics.jsonl").read_text().splitlines()
        return [json.loads(line)["_step"] for line in lines]

    def finish(self) -> None:
        (self.control / "finish").touch()

    def shipped_log(self) -> bytes:
        chunks = RunLogChunk.objects.filter(run=self.run.pk).order_by("offset")
        return b"".join(bytes(data) for data in chunks.values_list("data", flat=True))


@pytest.fixture
def postgres():
    server = Postgres()
    if not server.controllable:
        pytest.skip("an external database this test cannot restart (set AGENTSYS_TEST_PG_CTL)")
    yield server
    while Training.started:
        Training.started.pop().finish()
    if not server.up():
        server.start()  # a failed test must not leave the suite without its database
    connection.close()


@pytest.fixture
def system(agentsys_config, postgres, tmp_path):
    from tests.runtime_agents import ALL

    agentsys_config(extra_agent_classes=frozenset(ALL.split(",")))
    daemon = DaemonProcess("pg-host", AGENTSYS_GPUS="0,1", AGENTSYS_WORKDIR=str(tmp_path))
    web = Web(stderr=None)
    followers = [Follower("ws", web.port).start(), Follower("sse", web.port).start()]
    yield daemon, web, followers
    for follower in followers:
        follower.stop()
    if not postgres.up():
        postgres.start()
    connection.close()
    web.stop()
    daemon.stop()


def _logged_in_session() -> dict:
    from django.contrib.auth import get_user_model
    from django.test import Client

    client = Client()
    client.force_login(get_user_model().objects.create_user("researcher", password="x" * 12))
    return {"sessionid": client.cookies["sessionid"].value}


def _beat_after(host: str, moment) -> bool:
    return Host.objects.filter(name=host, last_heartbeat__gt=moment).exists()


def _recovered(daemon, followers, back_at_wall, back_at: float, training) -> dict:
    """Wait until the daemon heart-beats, both clients get a new event and the run's metrics
    are stored again; return how long each took after the database came back."""
    stored = len(query(training.stored_steps) or [])
    wait_for(lambda: _beat_after(daemon.name, back_at_wall), RECOVERY_SECONDS, "a heartbeat")
    beat = time.monotonic() - back_at
    wait_until(
        lambda: all(f.first_arrival_after(back_at) for f in followers),
        RECOVERY_SECONDS,
        message="both clients to receive an event after the database came back",
    )
    wait_for(lambda: len(training.stored_steps()) > stored, RECOVERY_SECONDS, "new metrics")
    figures = {"heartbeat": beat, "metrics": time.monotonic() - back_at}
    for follower in followers:
        figures[follower.kind] = follower.first_arrival_after(back_at) - back_at
    assert max(figures.values()) < RECOVERY_SECONDS, figures
    return figures


def test_everything_recovers_from_a_restart_and_an_outage(system, postgres, tmp_path):
    daemon, web, followers = system
    research = request_agent_start(
        cls_path=f"{A}.TestResearch",
        goal="ticks through the restarts",
        project="demo",
        config={"forever": True, "emit_ticks": True, "tick": 0.2},
    )
    first, second = Training(tmp_path, "first"), Training(tmp_path, "second")
    wait_for(
        lambda: all(t.refresh().status == RunStatus.RUNNING for t in (first, second)),
        20,
        "both runs to start",
    )
    wait_for(lambda: first.stored_steps() and second.stored_steps(), 20, "metrics stored")
    processes = {t.run.pk: t.process_pid() for t in (first, second)}
    session = _logged_in_session()

    # -- a restart ----------------------------------------------------------------------
    postgres.stop()
    postgres.start()
    back_wall, back = timezone.now(), time.monotonic()
    restart = _recovered(daemon, followers, back_wall, back, second)

    # -- an outage: the database stays down -----------------------------------------------
    postgres.stop()
    down_at = time.monotonic()
    api = httpx.get(f"{web.url}/api/runs", headers={"X-Auth-Token": TOKEN}, timeout=10)
    assert api.status_code == 503, api.text
    assert "database" in api.json()["detail"].lower()
    page = httpx.get(f"{web.url}/", cookies=session, timeout=10)
    assert page.status_code == 503
    assert page.headers["content-type"].startswith("text/html")
    assert "database" in page.text.lower()

    first.finish()  # its run ends while nobody can record it
    (second.control / "nan").touch()  # an alert nobody can store yet
    steps_before_nan = second.steps
    wait_until(lambda: (first.run_dir / "job.done").exists(), 10, message="first run's end")
    wait_until(lambda: second.steps > steps_before_nan + 2, 10, message="the NaN row")
    time.sleep(max(0.0, OUTAGE_SECONDS - (time.monotonic() - down_at)))
    assert daemon.process.poll() is None, "runagentd died with the database"
    assert pid_alive(processes[second.run.pk]), "a run's process died with the database"

    postgres.start()
    back_wall, back = timezone.now(), time.monotonic()
    outage = _recovered(daemon, followers, back_wall, back, second)

    # -- catching up ----------------------------------------------------------------------
    ended = wait_for(lambda: first.refresh().status == RunStatus.DONE, 10, "first's end")
    assert ended
    assert first.refresh().exit_code == 0
    assert first.stored_steps() == first.file_steps()  # every row once, none lost
    third = Training(tmp_path, "third")  # takes the GPU the first run freed
    wait_for(lambda: third.refresh().status == RunStatus.RUNNING, 10, "the queue to go on")
    wait_for(lambda: Alert.objects.filter(run=second.run.pk).exists(), 10, "the NaN alert")

    second.finish()
    third.finish()
    request_agent_command(agent_id=research.id, kind=CommandKind.STOP)
    for training in (second, third):
        wait_for(lambda t=training: t.refresh().status == RunStatus.DONE, 15, "runs to end")
        assert training.stored_steps() == training.file_steps()
    for training in (first, second, third):  # its log in the database: none lost, none twice
        assert training.shipped_log() == (training.run_dir / "run.log").read_bytes()
    wait_for(lambda: Agent.objects.get(pk=research.id).status == AgentStatus.STOPPED, 10, "stop")
    assert Alert.objects.filter(run=second.run.pk).count() == 1
    assert not Agent.objects.filter(status__in=["idle", "running", "paused"]).exists()

    # Every event once, numbered 1, 2, 3...; each client saw exactly the stream.
    seqs = list(Event.objects.filter(stream="agents").order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))
    for agent_id in [research.id, *(t.refresh().agent_id for t in (first, second, third))]:
        kinds = list(Event.objects.filter(agent_id=agent_id).values_list("kind", flat=True))
        assert kinds.count("started") == 1, (agent_id, kinds)
        assert sum(kinds.count(k) for k in ("done", "stopped", "failed")) == 1, (agent_id, kinds)
    for follower in followers:
        wait_until(lambda f=follower: f.last_id >= seqs[-1], 10, message=f"{follower.kind} end")
        assert follower.ids() == seqs, (follower.kind, follower.failures)

    print(
        f"\nrecovery after a restart: {_fmt(restart)}; after a {OUTAGE_SECONDS:g}s outage:"
        f" {_fmt(outage)}",
        file=sys.stderr,
    )


def test_runagentd_stops_in_time_while_the_database_is_down_and_the_next_one_catches_up(
    agentsys_config, postgres, tmp_path
):
    """SIGTERM during an outage: runagentd still stops within 5 s (nothing waits on the
    database for ever), the run goes on, and the next runagentd re-adopts it."""
    from tests.runtime_agents import ALL

    agentsys_config(extra_agent_classes=frozenset(ALL.split(",")))
    daemon = DaemonProcess("pg-stop", AGENTSYS_GPUS="1", AGENTSYS_WORKDIR=str(tmp_path))
    try:
        session = request_agent_start(
            cls_path=f"{A}.TestSession", goal="in-daemon", project="demo", config={"forever": True}
        )
        training = Training(tmp_path, "survivor")
        wait_for(lambda: training.stored_steps(), 20, "the run's metrics")
        postgres.stop()
        started = time.monotonic()
        assert daemon.stop(timeout=10) == 0
        assert time.monotonic() - started < 5
        assert pid_alive(training.process_pid())  # the run outlives its daemon and the outage
        postgres.start()
        connection.close()  # the test's own, broken by the outage
        daemon = DaemonProcess("pg-stop", AGENTSYS_GPUS="1", AGENTSYS_WORKDIR=str(tmp_path))
        training.finish()
        wait_for(lambda: training.refresh().status == RunStatus.DONE, 15, "the run's end")
        assert training.refresh().exit_code == 0
        assert training.stored_steps() == training.file_steps()
        # Its stopping runagentd shipped no more of its log than a second allowed; the next
        # one shipped the rest, from the database's offset.
        stored = b"".join(
            bytes(c.data) for c in RunLogChunk.objects.filter(run=training.run).order_by("offset")
        )
        assert stored == (training.run_dir / "run.log").read_bytes()
        # The in-daemon agent could not be recorded as stopped: the next daemon says why.
        wait_for(lambda: Agent.objects.get(pk=session.id).status != "running", 10, "session")
    finally:
        if not postgres.up():
            postgres.start()
        connection.close()
        daemon.stop()


def _fmt(figures: dict) -> str:
    return ", ".join(f"{name} {seconds:.2f}s" for name, seconds in figures.items())
