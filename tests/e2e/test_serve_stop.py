"""serve's stop waits for each child's whole session, not its leader: a worker that outlives
its leader, moved to another process group and ignores SIGTERM, is still ended."""

from __future__ import annotations

import io
import signal
import sys
import time

from agentsys import process_session
from researchagent.management.commands import serve
from researchagent.restart_policy import RestartPolicy, exit_cause
from tests.helpers import pid_alive, wait_until

STUBBORN = (
    "import os, signal, time; os.setpgid(0, 0); signal.signal(signal.SIGTERM, signal.SIG_IGN);"
    " open(os.environ['MARK'], 'w').write(str(os.getpid())); time.sleep(300)"
)


def test_stop_ends_the_session_when_the_leader_is_already_gone(tmp_path, monkeypatch):
    monkeypatch.setattr(serve, "STOP_GRACE_SECONDS", 1.0)
    monkeypatch.setenv("MARK", str(tmp_path / "pid"))
    command = serve.Command(stdout=io.StringIO(), stderr=io.StringIO())
    child = serve.Child("runagentd", [sys.executable, "-c", _leader()], RestartPolicy())
    command._spawn(child)
    worker = wait_until(lambda: (tmp_path / "pid").exists() and (tmp_path / "pid").read_text(), 20)
    worker = int(worker)
    child.process.wait(20)  # the leader exited on its own; its worker did not
    assert pid_alive(worker) and worker in process_session.session_members(*child.sessions[0])
    command._stop(child)
    assert not pid_alive(worker)
    assert process_session.session_members(*child.sessions[0]) == []
    assert "killed 1 process(es) left behind" in command.stderr._out.getvalue()


def test_a_leader_that_ignores_sigterm_is_killed_with_its_session_within_the_grace(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(serve, "STOP_GRACE_SECONDS", 1.0)
    monkeypatch.setenv("MARK", str(tmp_path / "pid"))
    command = serve.Command(stdout=io.StringIO(), stderr=io.StringIO())
    deaf_leader = (
        "import signal, subprocess, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
        f" subprocess.Popen([sys.executable, '-c', {STUBBORN!r}]); time.sleep(300)"
    )
    child = serve.Child("web", [sys.executable, "-c", deaf_leader], RestartPolicy())
    command._spawn(child)
    worker = int(
        wait_until(lambda: (tmp_path / "pid").exists() and (tmp_path / "pid").read_text(), 20)
    )
    started = time.monotonic()
    command._stop(child)
    took = time.monotonic() - started
    assert took < 1.0 + serve.KILL_WAIT_SECONDS, took
    assert child.process.returncode == -signal.SIGKILL
    assert not pid_alive(worker)
    assert process_session.session_members(*child.sessions[0]) == []
    said = command.stderr._out.getvalue()
    assert "web did not stop within 1s of SIGTERM; killing it" in said, said
    assert "killed 2 process(es)" in said, said


def _leader() -> str:
    return (
        "import subprocess, sys, time, os;"
        f" subprocess.Popen([sys.executable, '-c', {STUBBORN!r}]);"
        " [time.sleep(0.05) for _ in range(400) if not os.path.exists(os.environ['MARK'])]"
    )


def test_restart_policy_backs_off_then_gives_up_and_forgives_a_long_run():
    policy = RestartPolicy(max_fast_crashes=4, fast_seconds=30, first_delay=0.5, max_delay=3)
    assert [policy.after_exit(1) for _ in range(3)] == [0.5, 1.0, 2.0]
    assert policy.after_exit(1) is None  # the 4th fast crash in a row
    policy = RestartPolicy(max_fast_crashes=3, max_delay=1.5)
    assert [policy.after_exit(1), policy.after_exit(1)] == [0.5, 1.0]
    assert policy.after_exit(3600) == 0.5  # it had been working: start over
    assert policy.after_exit(1) == 0.5


def test_exit_cause_names_signals():
    assert exit_cause(-9) == "signal SIGKILL"
    assert exit_cause(3) == "exit code 3"
