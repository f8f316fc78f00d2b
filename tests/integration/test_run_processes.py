"""A run is its whole process set: stopping it ends every process it started, whatever group
or session they moved to, before its GPU goes to another run; and its command runs exactly
as typed, whatever valid sh it is. Real runagentd, real processes."""

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agents_app.models import Agent
from agentsys.proctree import process_info
from agentsys.types import AgentStatus
from scheduler_app.models import GPU, Run, RunStatus
from scheduler_app.runs import launch as runs
from tests.helpers import launch_run, run_ended, wait_until
from tests.runtime_harness import A, DaemonProcess, wait_event, wait_status

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
PY = sys.executable


@pytest.fixture
def daemon():
    process = DaemonProcess("proc-host", AGENTSYS_GPUS="1")  # one GPU, index 0
    yield process
    process.stop()


@pytest.fixture(autouse=True)
def _no_strays():
    """What a failing test leaves behind must not outlive it."""
    yield
    for token in ("3001", "3002", "3003", "3004", "3005", "3006", "3007", "3008"):
        for pid in processes_running(token):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def processes_running(*args: str) -> list[int]:
    """Live processes whose command line ends with `args` (scanned in /proc, independently
    of how the runtime finds a run's processes)."""
    wanted = [a.encode() for a in args]
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().rstrip(b"\0").split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if argv[-len(wanted) :] == wanted and state != "Z":
            found.append(int(entry.name))
    return found


def session_members(session: int) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[3]) == session and fields[0] != "Z":
            members.append(int(entry.name))
    return members


def gpu_free() -> bool:
    return not GPU.objects.filter(allocated_to__isnull=False).exists()


# Three processes that ignore SIGTERM (the trap's SIG_IGN is inherited), one of which left
# the run's session (setsid) and one its process group (setpgid).
STUBBORN = (
    'bash -c \'trap "" TERM; setsid sleep 3001 & '
    f'{PY} -c "import os,time; os.setpgid(0, 0); time.sleep(3002)" 3002 & '
    "sleep 3003 & wait'"
)
STUBBORN_PROCESSES = [("sleep", "3001"), ("3002",), ("sleep", "3003")]


def test_stop_ends_every_process_of_the_run_before_its_gpu_is_released(daemon, tmp_path):
    run = launch_run(tmp_path, STUBBORN, gpu_required=1)
    wait_event(run.agent_id, "run_started")
    wait_until(lambda: all(processes_running(*p) for p in STUBBORN_PROCESSES), 10)
    leader = int((Path(Run.objects.get(pk=run.pk).run_dir) / "job.pid").read_text().split()[0])
    assert not gpu_free()

    started = time.monotonic()
    runs.stop_run(run_id=run.pk)
    # The first moment the GPU is free, nothing of the run may be left to use it.
    wait_until(gpu_free, 20, interval=0.01, message="the GPU to be released")
    left = {p: processes_running(*p) for p in STUBBORN_PROCESSES}
    assert left == {p: [] for p in STUBBORN_PROCESSES}
    assert session_members(leader) == []
    run = run_ended(run)
    assert run.status == RunStatus.STOPPED
    assert time.monotonic() - started < 10  # 2 s after SIGTERM, then SIGKILL
    wait_status(run.agent_id, AgentStatus.STOPPED)


def test_what_a_finished_command_left_running_ends_with_it(daemon, tmp_path):
    run = launch_run(tmp_path, "(trap '' TERM; exec sleep 3004) & echo bye", gpu_required=1)
    run = run_ended(run)
    assert (run.status, run.exit_code) == (RunStatus.DONE, 0)
    assert gpu_free()
    assert processes_running("sleep", "3004") == []


def test_stopping_an_agent_ends_a_shell_that_left_its_process_group(daemon, agentsys_config):
    from agents_app.services import request_agent_command, request_agent_start
    from agentsys.types import CommandKind
    from tests.runtime_agents import ALL

    agentsys_config(extra_agent_classes=frozenset(ALL.split(",")))
    shell = f"trap '' TERM; {PY} -c 'import os,time; os.setpgid(0, 0); time.sleep(3005)' 3005"
    agent = request_agent_start(
        cls_path=f"{A}.TestResearch",
        goal="g",
        project="demo",
        config={"forever": True, "shell": shell},
    )
    wait_event(agent.id, "shell")
    wait_until(lambda: processes_running("3005"), 10)
    request_agent_command(agent_id=agent.id, kind=CommandKind.STOP)
    wait_status(agent.id, AgentStatus.STOPPED)
    # Seen stopped, its shells are gone already; only its worker may still be exiting.
    worker = Agent.objects.get(pk=agent.id).pid
    assert processes_running("3005") == []
    assert [pid for pid in session_members(worker) if pid != worker] == []
    wait_until(lambda: not session_members(worker), 10, message="the worker to exit")


# -- the command runs exactly as typed -----------------------------------------------------

QUOTES = (
    'echo \'single $HOME\' "double $((1+1))" back\\\\slash "it\'s" \'say "hi"\' '
    "\"$(echo sub)\" `echo tick` \\$literal $'ansi\\tquote'"
)
MATRIX = {
    "trailing comment": ("echo one # a trailing comment", 0, "one\n"),
    "comment with a paren": ("echo ok # (", 0, "ok\n"),
    "here-document": ("cat <<'EOF'\nliteral $HOME `x`\nEOF\necho after", 0, None),
    "here-document last": ("cat <<EOF\nsum $((2+3))\nEOF", 0, "sum 5\n"),
    "multi-line script": ("x=2\nif [ $x -gt 1 ]; then\n  echo big\nfi", 0, "big\n"),
    "exit 3": ("echo trying\nexit 3", 3, "trying\n"),
    "set -e": ("set -e\necho before\nfalse\necho after", 1, "before\n"),
    "quotes of every kind": (QUOTES, 0, None),
    "reads stdin": ("cat; echo done", 0, "done\n"),
    "cd elsewhere first": ("cd /tmp && pwd", 0, "/tmp\n"),
}


def test_commands_run_exactly_as_typed(daemon, tmp_path):
    launched = {name: launch_run(tmp_path, command) for name, (command, _, _) in MATRIX.items()}
    env_run = launch_run(
        tmp_path, 'echo "cvd=$CUDA_VISIBLE_DEVICES dir=$AGENTSYS_RUN_DIR" # env', gpu_required=1
    )
    params_run = launch_run(tmp_path, "printf '%s\\n'", params={"lr": 0.1, "name": "a b"})
    outcome = {}
    for name, run in launched.items():
        run = run_ended(run)
        command, _, expected = MATRIX[name]
        if expected is None:  # what /bin/sh itself makes of the text
            expected = subprocess.run(
                ["/bin/sh", "-c", command], capture_output=True, text=True, check=False
            ).stdout
        outcome[name] = (run.exit_code, (Path(run.run_dir) / "run.log").read_text(), expected)
        assert (Path(run.run_dir) / "command.txt").read_text() == command + "\n"
    assert {n: (code, log) for n, (code, log, _) in outcome.items()} == {
        n: (MATRIX[n][1], expected) for n, (_, _, expected) in outcome.items()
    }
    assert Run.objects.get(pk=launched["exit 3"].pk).status == RunStatus.FAILED
    assert Run.objects.get(pk=launched["trailing comment"].pk).status == RunStatus.DONE
    env_run = run_ended(env_run)
    assert (Path(env_run.run_dir) / "run.log").read_text() == f"cvd=0 dir={env_run.run_dir}\n"
    params_run = run_ended(params_run)
    assert (Path(params_run.run_dir) / "run.log").read_text() == "--lr=0.1\n--name=a b\n"


def test_runagentd_shutdown_ends_an_agents_shell_that_left_its_process_group(agentsys_config):
    from agents_app.services import request_agent_start
    from tests.runtime_agents import ALL

    agentsys_config(extra_agent_classes=frozenset(ALL.split(",")))
    daemon = DaemonProcess("shutdown-host")
    shell = f"trap '' TERM; {PY} -c 'import os,time; os.setpgid(0, 0); time.sleep(3006)' 3006"
    agent = request_agent_start(
        cls_path=f"{A}.TestResearch",
        goal="g",
        project="demo",
        config={"forever": True, "shell": shell},
    )
    wait_event(agent.id, "shell")
    wait_until(lambda: processes_running("3006"), 10)
    assert daemon.stop() == 0
    assert processes_running("3006") == []


def test_a_killed_workers_shells_end_with_it(daemon, agentsys_config):
    from agents_app.services import request_agent_start
    from tests.runtime_agents import ALL

    agentsys_config(extra_agent_classes=frozenset(ALL.split(",")))
    shell = f"{PY} -c 'import os,time; os.setpgid(0, 0); time.sleep(3007)' 3007"
    agent = request_agent_start(
        cls_path=f"{A}.TestResearch",
        goal="g",
        project="demo",
        config={"forever": True, "shell": shell},
    )
    wait_event(agent.id, "shell")
    wait_until(lambda: processes_running("3007"), 10)
    worker = Agent.objects.get(pk=agent.id)
    # Recorded with its start time: the next runagentd tells it from a process given its pid.
    assert worker.pid_start == process_info(worker.pid).start_time
    os.kill(worker.pid, signal.SIGKILL)
    failed = wait_status(agent.id, AgentStatus.FAILED)
    assert "killed by SIGKILL" in failed.error
    assert processes_running("3007") == []  # gone before the failure was recorded


@pytest.mark.parametrize("same_process", [True, False], ids=["its-worker", "pid-reused"])
def test_a_new_runagentd_kills_a_leftover_worker_by_pid_and_start_time(same_process):
    """A worker its dead runagentd left is killed by the next one; a process that only got
    the same pid since (pids wrap around at 32768) is someone else's and lives on."""
    from agentsys.proctree import process_info
    from hosts_app.models import Host

    # Leads its own process group, as a worker does.
    stand_in = subprocess.Popen(
        [PY, "-c", "import time; time.sleep(3008)", "3008"], start_new_session=True
    )
    try:
        wait_until(lambda: process_info(stand_in.pid), 10)
        started = process_info(stand_in.pid).start_time
        agent = Agent.objects.create(
            id="orchestrator-leftover",
            role="orchestrator",
            cls_path=f"{A}.TestResearch",
            goal="g",
            project="demo",
            status=AgentStatus.RUNNING,
            host=Host.objects.create(name="leftover-host"),
            pid=stand_in.pid,
            pid_start=started if same_process else started - 1,
        )
        daemon = DaemonProcess("leftover-host")
        try:
            failed = wait_status(agent.id, AgentStatus.FAILED)
            assert "its worker was lost" in failed.error
            if same_process:
                assert stand_in.wait(10) == -signal.SIGKILL
            else:
                time.sleep(0.5)  # a kill sent with the failure would have landed by now
                assert stand_in.poll() is None
        finally:
            assert daemon.stop() == 0
    finally:
        stand_in.kill()
        stand_in.wait()
