"""Bad input from unmodified training scripts, through the queue (issue 20's "Bad input"): a
corrupt or truncated TensorBoard event file, an MLflow store the script holds locked, a W&B
offline log cut mid-record, a 200 MB printed line with no newline, and a metrics_pattern that
backtracks catastrophically. Each run ends done, what could be read is charted, and each
problem is said once on the run page.

The scripts use the real libraries; where a file is damaged, the script damages its own output
after writing it, to simulate a writer that crashed mid-write (said at each place)."""

import sys
import textwrap
import threading
import time

import psutil
import pytest

from agentsys.run_dir import run_dir_of
from events_app.models import Event
from scheduler_app.models import MetricPoint, MetricSeries, Run, RunStatus
from tests.helpers import launch_run, run_ended, wait_until
from tests.runtime_harness import DaemonProcess

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
PY = sys.executable

TENSORBOARD_SCRIPT = textwrap.dedent(
    """
    import glob, os
    from tensorboardX import SummaryWriter

    first = SummaryWriter("tb")
    for step in range(1, 11):
        first.add_scalar("loss", 1.0 / step, step)
    first.close()
    [path] = glob.glob("tb/events.out.tfevents.*")
    # Simulates a writer that crashed while writing: junk after the last whole record.
    with open(path, "ab") as handle:
        handle.write(bytes(range(7, 250, 3)))
    second = SummaryWriter("tb", filename_suffix=".again")
    for step in range(11, 21):
        second.add_scalar("loss", 1.0 / step, step)
    second.close()
    [again] = glob.glob("tb/*.again")
    # Simulates a crash mid-record: the last record (step 20) is cut short for good.
    os.truncate(again, os.path.getsize(again) - 5)
    print("done", flush=True)
    """
)

# Holds an exclusive flock on every file of its MLflow store (and keeps them open) while it
# logs, and until the test has seen every point charted (it then writes `seen`): our reader
# reads by offset and takes no lock, so a reader that waited on the lock never sees them.
MLFLOW_SCRIPT = textwrap.dedent(
    """
    import fcntl, os, time
    from pathlib import Path
    from urllib.parse import urlparse
    import mlflow

    store = Path(urlparse(os.environ["MLFLOW_TRACKING_URI"]).path)
    held = []

    def lock_all():
        for path in store.rglob("*"):
            if path.is_file() and str(path) not in {h.name for h in held}:
                handle = open(path, "rb")
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                held.append(handle)

    with mlflow.start_run():
        mlflow.log_param("lr", 0.1)
        for step in range(1, 11):
            mlflow.log_metric("loss", 1.0 / step, step=step)
        lock_all()
        for step in range(11, 21):
            mlflow.log_metric("loss", 1.0 / step, step=step)
            mlflow.log_metric("acc", step / 20, step=step)
        lock_all()
        print("locked", len(held), flush=True)
        deadline = time.monotonic() + 30
        while not os.path.exists("seen") and time.monotonic() < deadline:
            time.sleep(0.1)
    """
)

WANDB_SCRIPT = textwrap.dedent(
    """
    import glob, os, shutil, time
    import wandb

    # Logged where AgentSys does not look, cut there, then moved where it looks: it reads the
    # cut log only (logged in sight, the whole marker record was read before the cut on a
    # busy machine).
    watched = os.path.join(os.environ["WANDB_DIR"], "wandb")
    os.environ["WANDB_DIR"] = os.path.join(os.environ["WANDB_DIR"], "staging")
    os.makedirs(os.environ["WANDB_DIR"], exist_ok=True)
    run = wandb.init(project="bad", config={"lr": 0.1})
    for step in range(1, 11):
        wandb.log({"loss": 1.0 / step}, step=step)
    wandb.log({"marker": 12345.678}, step=11)
    folder = os.path.dirname(run.dir)  # offline-run-<time>-<id>/files: the log is beside it
    run.finish()
    [log] = glob.glob(os.path.join(folder, "run-*.wandb"))
    # Where step 11's history record lies, by wandb's own reader (a plain search for its
    # bytes can miss: a record may straddle one of the log's 32 KiB block headers).
    from wandb.sdk.internal.datastore import DataStore

    def marker_record():
        store = DataStore()
        store.open_for_scan(log)
        while True:
            start = store._index
            record = store.scan_data()
            if record is None:
                return None
            if b"12345.678" in record:
                return start + 7 + len(record) // 2  # past its 7-byte header, inside it

    # wandb's service may still be writing the log when finish() returns (seen on a busy
    # machine): look again until step 11's record is there.
    deadline = time.monotonic() + 60
    while (cut := marker_record()) is None:
        assert time.monotonic() < deadline, "no record holds the marker"
        time.sleep(0.2)
    size = os.path.getsize(log)
    # Simulates a crash mid-write: the log ends in the middle of that record.
    os.truncate(log, cut)
    os.makedirs(watched, exist_ok=True)
    shutil.move(folder, os.path.join(watched, os.path.basename(folder)))
    print("cut at", cut, "of", size, flush=True)
    """
)

BIG_LINE_MB = 200
BIG_LINE_SCRIPT = textwrap.dedent(
    f"""
    import sys, time
    out = sys.stdout.buffer
    out.write(b"step 1 | loss 0.9\\n")
    block = b"x" * (1024 * 1024)
    for _ in range({BIG_LINE_MB}):
        out.write(block)  # one line, no newline yet
    out.flush()
    time.sleep(3.5)  # the watchdog reads while the line is still unterminated
    out.write(b"\\nstep 2 | loss 0.5\\n")
    out.flush()
    """
)

BACKTRACKING_PATTERN = r"(?P<loss>(a+)+)$"
BACKTRACKING_SCRIPT = textwrap.dedent(
    """
    print("step 1 | loss 0.9", flush=True)
    for _ in range(25):
        print("a" * 5000 + "b", flush=True)  # (a+)+$ on this backtracks for ages
    print("step 2 | loss 0.5", flush=True)
    print("step 3 | loss 0.25", flush=True)
    """
)


@pytest.fixture
def daemon(settings):
    # This web's own host: it reads run.log from the disk (the database holds only the 1 MB
    # head of a 200 MB log, tests/integration/test_run_log_shipping.py).
    process = DaemonProcess(
        settings.AGENTSYS.host_name,
        AGENTSYS_GPUS="",
        WANDB_SILENT="true",
        AGENTSYS_LOG_DB_CAP_MB="1",
    )
    yield process
    if process.process.poll() is None:
        process.stop()


@pytest.fixture
def reader(client):
    from django.contrib.auth import get_user_model

    get_user_model().objects.create_user("reader", password="p" * 12)
    client.login(username="reader", password="p" * 12)
    return client


def _run(workdir, name, script, timeout=60, **extra):
    (workdir / name).write_text(script)
    run = run_ended(launch_run(workdir, f"{PY} {name}", **extra), timeout=timeout)
    assert run.status == RunStatus.DONE, run.error
    return run


def _steps(run, key):
    series = MetricSeries.objects.get(run=run, key=key)
    return list(MetricPoint.objects.filter(series=series).order_by("step").values_list("step"))


def _problems(run) -> list[tuple[str, str]]:
    events = Event.objects.filter(agent_id=run.agent_id, kind="metrics_problem").order_by("seq")
    return [(e.payload["source"], e.payload["problem"]) for e in events]


def _page(reader, run) -> str:
    started = time.monotonic()
    response = reader.get(f"/runs/{run.pk}/")
    assert response.status_code == 200
    assert time.monotonic() - started < 5
    return response.content.decode()


def _said_once(page: str, *phrases: str) -> None:
    assert page.count("Some metrics could not be read") == 1
    for phrase in phrases:
        assert page.count(phrase) == 1, phrase


def test_a_corrupt_and_a_truncated_event_file(daemon, tmp_path, reader):
    run = _run(tmp_path, "train_tb.py", TENSORBOARD_SCRIPT)
    loss = MetricSeries.objects.get(run=run, key="loss")
    assert loss.source == "tensorboard"
    # Every whole record: the first file's 10 before its junk, the second's up to the cut one.
    assert [s for (s,) in _steps(run, "loss")] == list(range(1, 20))
    # The junk in the first file, the cut record of the second: each file's problem once.
    [(_, corrupt), (_, cut)] = _problems(run)
    assert ".again" not in corrupt and "a corrupt record at byte" in corrupt
    assert ".again: the last record is cut short at byte" in cut
    page = _page(reader, run)
    _said_once(page, "a corrupt record at byte", "the last record is cut short at byte")


def test_an_mlflow_store_the_script_holds_locked(daemon, tmp_path, reader):
    (tmp_path / "train_mlflow.py").write_text(MLFLOW_SCRIPT)
    run = launch_run(tmp_path, f"{PY} train_mlflow.py")

    def all_read():
        series = MetricSeries.objects.filter(run=run, key="loss").first()
        return series is not None and series.points == 20

    wait_until(all_read, 25, message="the 20 losses")
    # Read by the watchdog while the script still runs, holding every file locked.
    assert Run.objects.get(pk=run.pk).status == RunStatus.RUNNING
    (tmp_path / "seen").touch()
    run = run_ended(run, timeout=60)
    assert run.status == RunStatus.DONE, run.error
    log = (run_dir_of(tmp_path, run.agent_id) / "run.log").read_text()
    assert "locked" in log and int(log.split("locked")[1].split()[0]) >= 3  # it did lock
    loss = MetricSeries.objects.get(run=run, key="loss")
    assert loss.source == "mlflow"
    assert [s for (s,) in _steps(run, "loss")] == list(range(1, 21))
    assert [s for (s,) in _steps(run, "acc")] == list(range(11, 21))
    assert _problems(run) == []
    assert "Some metrics could not be read" not in _page(reader, run)


def test_a_wandb_log_cut_mid_record(daemon, tmp_path, reader):
    run = _run(tmp_path, "train_wandb.py", WANDB_SCRIPT, timeout=120)
    assert MetricSeries.objects.get(run=run, key="loss").source == "wandb"
    assert [s for (s,) in _steps(run, "loss")] == list(range(1, 11))  # every record before
    assert not MetricSeries.objects.filter(run=run, key="marker").exists()  # the cut one
    problems = _problems(run)
    assert problems and {source for source, _ in problems} == {"wandb"}, problems
    _said_once(_page(reader, run), "the last record is cut short at byte")


class DaemonMemory:
    """Samples the resident memory of the daemon and its workers (not the run's own processes,
    which run in its workdir) every 0.1 s: per process, its first and largest RSS."""

    def __init__(self, pid: int, workdir):
        self.root, self.workdir = psutil.Process(pid), str(workdir)
        self.seen: dict[int, list[int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self):
        self._settle()
        self._thread.start()
        return self

    def _settle(self, timeout: float = 30) -> None:
        """Wait until no process of the daemon is still starting: a spare worker it forks
        grows by ~60 MiB while it imports Django (slowly on a busy machine), which is not what
        this measures. Settled: the same processes, none grown by 2 MiB, over 0.5 s."""
        deadline, before = time.monotonic() + timeout, self._sizes()
        while time.monotonic() < deadline:
            time.sleep(0.5)
            now = self._sizes()
            if now.keys() == before.keys() and all(now[p] - before[p] < 2**21 for p in now):
                return
            before = now
        raise AssertionError(f"the daemon's processes did not settle: {before}")

    def _sizes(self) -> dict[int, int]:
        sizes = {}
        for process in [self.root, *self.root.children(recursive=True)]:
            try:
                sizes[process.pid] = process.memory_info().rss
            except psutil.Error:
                continue
        return sizes

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        while True:
            for process in [self.root, *self.root.children(recursive=True)]:
                try:
                    if process.cwd().startswith(self.workdir):
                        continue  # the run's shell and script
                    rss = process.memory_info().rss
                except psutil.Error:
                    continue
                first, peak = self.seen.setdefault(process.pid, [rss, rss])
                self.seen[process.pid] = [first, max(peak, rss)]
            if self._stop.wait(0.1):
                return


def test_a_200_mb_printed_line_with_no_newline(daemon, tmp_path, reader, api):
    with DaemonMemory(daemon.pid, tmp_path) as memory:
        run = _run(tmp_path, "big_line.py", BIG_LINE_SCRIPT)
    grew = max(peak - first for first, peak in memory.seen.values())
    largest = max(peak for _, peak in memory.seen.values())
    print(
        f"daemon processes: {len(memory.seen)}, most grown {grew >> 20} MiB, "
        f"largest {largest >> 20} MiB"
    )
    # Holding the line would cost 200 MiB in one process; reading it costs a block or two.
    assert grew < 50 * 2**20 and largest < BIG_LINE_MB * 2**20, memory.seen

    assert [s for (s,) in _steps(run, "loss")] == [1, 2]  # the line after it is charted
    assert [source for source, _ in _problems(run)] == ["stdout"]
    page = _page(reader, run)
    _said_once(page, "skipped a line longer than")
    assert len(page) < 1_000_000  # the page does not carry the line

    # The log view's reads: its probe of the size, then bounded slices.
    started = time.monotonic()
    probe = api("get", f"/api/runs/{run.pk}/logs?offset={2**53}&limit=1").json()
    assert probe["size"] > BIG_LINE_MB * 2**20
    tail = api("get", f"/api/runs/{run.pk}/logs?offset={probe['size'] - 65536}").json()
    assert tail["text"].endswith("step 2 | loss 0.5\n")
    middle = api("get", f"/api/runs/{run.pk}/logs?offset=1000&limit=1000000")
    assert len(middle.content) < 1_100_000
    assert time.monotonic() - started < 5


def test_a_pattern_that_backtracks_catastrophically(daemon, tmp_path, reader):
    options = {"metrics_pattern": BACKTRACKING_PATTERN}
    started = time.monotonic()
    run = _run(tmp_path, "train_prints.py", BACKTRACKING_SCRIPT, executor_options=options)
    assert time.monotonic() - started < 30
    loss = MetricSeries.objects.get(run=run, key="loss")
    assert loss.source == "stdout"
    # The lines the pattern does not match are read by the common shapes, before and after.
    assert [s for (s,) in _steps(run, "loss")] == [1, 2, 3]
    problems = [problem for _, problem in _problems(run)]
    assert len(problems) == 2, problems  # timed out on a line; dropped after 20 such lines
    page = _page(reader, run)
    _said_once(page, "metrics_pattern timed out on a line", "metrics_pattern timed out on 20")
