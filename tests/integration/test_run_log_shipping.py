"""A run's log through PostgreSQL (issue 24 part 2): a runagentd on host "gpu-b" ships what
its command prints, and the API, the run page and the chat's report serve it on a web whose
own host is another, that cannot read gpu-b's disk: while it runs, in order, byte for byte
what the file holds, after its run dir is deleted, across a SIGKILL of runagentd, and up to
the cap, past which the page says where the rest is. Real runagentd processes."""

import shutil
import signal
import sys
from pathlib import Path

import pytest

from scheduler_app.models import Run, RunLogChunk, RunStatus
from tests.helpers import launch_run, run_ended, wait_until
from tests.runtime_harness import DaemonProcess, wait_event

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
PY = sys.executable
HOST = "gpu-b"


@pytest.fixture
def daemons(settings):
    assert settings.AGENTSYS.host_name != HOST  # this web does not share gpu-b's disk
    started = []

    def start(**env):
        started.append(DaemonProcess(HOST, AGENTSYS_GPUS="1", **env))
        return started[-1]

    yield start
    for daemon in started:
        if daemon.process.poll() is None:
            daemon.stop()


def script(tmp_path, body: str) -> str:
    path = tmp_path / "train.py"
    path.write_text(body)
    return f"{PY} -u {path}"


def served(api, run_id: str, limit: int = 65536) -> tuple[bytes, dict]:
    """The whole log as the page reads it: slices from 0, each from the last's next_offset."""
    data, offset = b"", 0
    while True:
        chunk = api("get", f"/api/runs/{run_id}/logs?offset={offset}&limit={limit}").json()
        assert chunk["offset"] == offset
        data += chunk["text"].encode()
        if chunk["next_offset"] == offset:
            return data, chunk
        offset = chunk["next_offset"]


def log_file(run: Run) -> Path:
    return Path(Run.objects.get(pk=run.pk).run_dir) / "run.log"


def assert_contiguous(run: Run) -> None:
    """No gap and no byte stored twice: each chunk starts where the one before ended."""
    chunks = list(
        RunLogChunk.objects.filter(run=run).order_by("offset").values_list("offset", "data")
    )
    end = 0
    for offset, data in chunks:
        assert offset == end
        end += len(data)
    assert end == Run.objects.get(pk=run.pk).log_shipped_bytes


def test_the_log_is_served_from_the_database_while_it_runs_and_after_its_dir_is_gone(
    api, daemons, tmp_path
):
    daemons()
    release = tmp_path / "release"
    train = script(
        tmp_path,
        "import pathlib, time\n"
        "for i in range(400):\n"
        "    print(f'step {i} loss {1 / (i + 1):.6f} ' + 'x' * 40)\n"
        "time.sleep(1.0)\n"
        "print('after the pause')\n"
        f"while not pathlib.Path({str(release)!r}).exists():\n"
        "    time.sleep(0.05)\n"
        "print('the end')\n",
    )
    run = launch_run(tmp_path, train)
    wait_event(run.agent_id, "run_started")

    # While it runs: the line printed after the pause arrives, in order, a prefix of the file.
    def paused_line_served():
        data, last = served(api, run.pk, limit=7001)  # slices that cut lines and chunks
        return (data, last) if b"after the pause\n" in data else None

    data, last = wait_until(paused_line_served, 10, message="the line printed after a pause")
    assert Run.objects.get(pk=run.pk).status == RunStatus.RUNNING
    assert last["host"] == HOST and last["capped"] is False
    assert data.endswith(b"after the pause\n")
    assert log_file(run).read_bytes().startswith(data)
    lines = data.decode().splitlines()
    assert lines[:400] == [f"step {i} loss {1 / (i + 1):.6f} " + "x" * 40 for i in range(400)]

    release.touch()
    run = run_ended(run)
    assert (run.status, run.exit_code) == (RunStatus.DONE, 0)
    whole = log_file(run).read_bytes()
    assert whole.endswith(b"the end\n")
    assert served(api, run.pk)[0] == whole  # all of it stored before the run said it ended
    assert_contiguous(run)

    shutil.rmtree(run.run_dir)  # the disk it ran on is gone from reach
    data, last = served(api, run.pk, limit=100_000)
    assert data == whole and last["size"] == len(whole)
    from runtime_app.chat_context import child_report

    assert child_report(run.agent_id)["log_tail"].endswith("after the pause\nthe end\n")


def test_past_the_cap_the_database_keeps_the_head_and_the_page_says_where_the_rest_is(
    api, admin_client, daemons, tmp_path
):
    daemons(AGENTSYS_LOG_DB_CAP_MB="1")
    train = script(
        tmp_path,
        "import sys\n"
        "for i in range(30000):\n"
        "    print(f'{i:08d} ' + 'x' * 50)\n"  # 60 bytes a line: 1.8 MB in all
        "print('Traceback (most recent call last):')\n"
        "print('ValueError: the last line, only on gpu-b')\n"
        "sys.exit(3)\n",
    )
    run = run_ended(launch_run(tmp_path, train))
    assert (run.status, run.exit_code) == (RunStatus.FAILED, 3)
    whole = log_file(run).read_bytes()
    assert len(whole) > 1_800_000
    data, last = served(api, run.pk, limit=1_000_000)
    assert last["capped"] is True and last["host"] == HOST
    assert data[: 2**20] == whole[: 2**20]  # the head, byte for byte
    note = data[2**20 :].decode()
    assert "the log past 1 MiB is kept only on host gpu-b at " in note
    assert str(log_file(run)) in note
    assert len(data) == last["size"] < 2**20 + 500
    assert_contiguous(run)

    page = admin_client.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="log-capped"' in page and "hidden" not in page.split('id="log-capped"')[1][:20]
    assert 'The log past <span id="log-cap">1 MiB</span> is kept only on host' in page
    assert '<strong id="log-host">gpu-b</strong>' in page
    assert f"{run.run_dir}/run.log" in page


def test_a_sigkill_of_runagentd_mid_run_resumes_the_log_with_no_gap_and_no_duplicate(
    api, daemons, tmp_path
):
    first = daemons()
    release = tmp_path / "release"
    train = script(
        tmp_path,
        "import pathlib, time\n"
        "i = 0\n"
        f"while not pathlib.Path({str(release)!r}).exists() or i < 40:\n"
        "    print(f'tick {i}')\n"
        "    i += 1\n"
        "    time.sleep(0.02)\n"
        "print('done ticking')\n",
    )
    run = launch_run(tmp_path, train)
    wait_until(
        lambda: Run.objects.get(pk=run.pk).log_shipped_bytes > 50, 20, message="some log stored"
    )
    first.stop(signal.SIGKILL)
    stored_before = Run.objects.get(pk=run.pk).log_shipped_bytes
    wait_until(
        lambda: log_file(run).stat().st_size > stored_before + 200,
        10,
        message="the command to print on while nobody ships",
    )
    daemons()
    wait_event(run.agent_id, "run_adopted", timeout=15)
    release.touch()
    run = run_ended(run)
    assert (run.status, run.exit_code) == (RunStatus.DONE, 0)
    whole = log_file(run).read_bytes()
    data, _ = served(api, run.pk)
    assert data == whole
    ticks = [line for line in data.decode().splitlines() if line.startswith("tick ")]
    assert ticks == [f"tick {i}" for i in range(len(ticks))]
    assert_contiguous(run)


@pytest.fixture
def remote_run(tmp_path):
    """A run that ran on gpu-b (its dir not on this disk), as the database has it."""
    from agents_app.models import Agent
    from hosts_app.models import Host

    agent = Agent.objects.create(
        id="executor-remote1",
        role="executor",
        cls_path="x",
        project="p",
        host=Host.objects.create(name=HOST),
    )
    return Run.objects.create(
        name="r",
        command="train",
        agent=agent,
        run_dir=str(tmp_path / "elsewhere"),
        status=RunStatus.FAILED,
        exit_code=3,
    )


def test_a_chunk_is_stored_only_where_the_stored_log_ends(api, remote_run):
    from scheduler_app.runs.log_store import append_log

    assert append_log(run_id=remote_run.pk, offset=0, data=b"alpha\n") == (6, False)
    assert append_log(run_id=remote_run.pk, offset=0, data=b"alpha\n") == (6, False)  # again
    assert append_log(run_id=remote_run.pk, offset=2, data=b"pha\nbeta\n") == (6, False)
    assert append_log(run_id=remote_run.pk, offset=6, data=b"beta\n") == (11, False)
    assert append_log(run_id=remote_run.pk, offset=11, data=b"[note]\n", capped=True) == (18, True)
    assert append_log(run_id=remote_run.pk, offset=18, data=b"more\n") == (18, True)
    assert_contiguous(remote_run)
    part = api("get", f"/api/runs/{remote_run.pk}/logs?offset=3&limit=6").json()
    assert part == {
        "offset": 3,
        "next_offset": 9,
        "size": 18,
        "text": "ha\nbet",
        "capped": True,
        "host": HOST,
    }
    past = api("get", f"/api/runs/{remote_run.pk}/logs?offset=99").json()
    assert (past["offset"], past["next_offset"], past["text"]) == (18, 18, "")


async def test_a_research_loop_on_another_host_reads_its_experiments_outcome_from_the_database(
    remote_run, close_db_connections
):
    from asgiref.sync import sync_to_async

    from agentsys.agent import Agent
    from agentsys.research.experiments import _exit_code_and_log
    from runtime_app.run_port import DjangoRunPort
    from scheduler_app.runs.log_store import append_log

    lines = "".join(f"step {i}\n" for i in range(100)) + "ValueError: diverged\n"
    for start in range(0, len(lines), 256):
        await sync_to_async(append_log)(
            run_id=remote_run.pk, offset=start, data=lines[start : start + 256].encode()
        )

    class Loop(Agent):
        async def in_runs(self, method, /, **kwargs):  # on asgiref's thread, closed after
            return await sync_to_async(getattr(self.runs, method))(**kwargs)

    loop = Loop()
    loop.id, loop.runs = "research-1", DjangoRunPort("research-1")
    exit_code, tail = await _exit_code_and_log(loop, remote_run.agent_id, Path(remote_run.run_dir))
    assert exit_code == 3
    assert tail.splitlines() == [f"step {i}" for i in range(71, 100)] + ["ValueError: diverged"]
