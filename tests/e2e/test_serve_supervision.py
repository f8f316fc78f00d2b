"""`manage.py serve` as an operator meets it: a killed runagentd is restarted while the web
keeps answering; a daemon that cannot start makes serve give up, saying so; the console shows
runs and restarts, not requests; the printed curl line starts the demo run; at shutdown serve
says which runs it leaves going, and `manage.py runs stop --all` ends them."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import httpx
import psutil
import pytest

from agentsys.process_session import session_members
from researchagent.management.commands.serve import Command
from tests.e2e.test_make_run import OutputReader
from tests.helpers import child_env, free_port, manage, pid_alive, wait_until

pytestmark = pytest.mark.slow

ACCESS_LOG_LINE = re.compile(r'"(GET|POST) /\S* HTTP/1\.\d" \d{3}|\] "(GET|POST) ')


def _serve(home, port, *extra, **env_overrides):
    env = child_env(
        AGENTSYS_HOME=str(home),
        PORT=str(port),
        DATABASE_URL=None,
        AGENTSYS_ADMIN_PASSWORD=None,
        AGENTSYS_WORKDIR=None,
        AGENTSYS_HOST_NAME="serve-test",
        AGENTSYS_ACCESS_LOG=None,
        LOG_LEVEL="INFO",
        AGENTSYS_DEMO_SECONDS="0",  # the demo loop as fast as it goes: nobody watches it
        **env_overrides,
    )
    process = manage(
        "serve", *extra, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    return process, OutputReader(process.stdout), env


def _child(serve: subprocess.Popen, word: str) -> psutil.Process | None:
    for proc in psutil.Process(serve.pid).children():
        try:
            if word in " ".join(proc.cmdline()) and proc.status() != psutil.STATUS_ZOMBIE:
                return proc
        except psutil.NoSuchProcess:
            continue
    return None


def _health(client: httpx.Client) -> dict:
    return client.get("/api/health").json()


def _daemon_pid(client: httpx.Client) -> int | None:
    hosts = [h for h in _health(client).get("hosts", []) if h["name"] == "serve-test"]
    return hosts[0]["daemon_pid"] if hosts and hosts[0]["alive"] else None


def _everything(serve: subprocess.Popen) -> list[int]:
    return [p.pid for p in psutil.Process(serve.pid).children(recursive=True)]


# 78 s on a quiet CI machine (a whole `serve`, a loop from `make chat`, a runagentd killed and
# brought back): the default 120 s left too little for a busy one (it timed out twice while
# `serve` was still starting, at load 8-12).
@pytest.mark.timeout(300)
def test_serve_restarts_a_killed_daemon_and_keeps_the_web_up(migrated_home):
    home, port = migrated_home, free_port()
    serve, output, env = _serve(home, port)
    family: list[int] = []
    try:
        wait_until(lambda: output.find("Ctrl-C stops everything"), 120, 0.2, "the banner")
        token = output.find(r"API token for 'admin' \(shown only this once\): (\S+)").group(1)
        curl = output.find(r"^\s+(curl .*/api/runs)$").group(1)
        base = f"http://127.0.0.1:{port}"
        headers = {"X-Auth-Token": token}
        with httpx.Client(base_url=base, headers=headers, timeout=10) as client:
            first = wait_until(lambda: _daemon_pid(client), 60, 0.2, "runagentd to heart-beat")

            # The printed curl line, run as a newcomer would paste it into a shell.
            pasted = subprocess.run(
                ["sh", "-c", curl + " -s -w '\\n%{http_code}'"],
                capture_output=True,
                text=True,
                timeout=30,
            )
            body, code = pasted.stdout.rsplit("\n", 1)
            assert code == "201", pasted
            run_id = httpx.Response(201, content=body).json()["id"]
            run = wait_until(
                lambda: (
                    (r := client.get(f"/api/runs/{run_id}").json())["status"]
                    not in ("queued", "running")
                    and r
                ),
                90,
                0.3,
                "the demo run to end",
            )
            assert run["status"] == "done" and run["exit_code"] == 0, run
            wait_until(lambda: output.find(rf"run {run_id} .*done with exit code 0"), 10)
            assert output.find(rf"run {run_id} \(demo: train.py\) queued"), output.text
            assert output.find(rf"run {run_id} \(demo: train.py\) started on serve-test"), (
                output.text
            )
            assert output.find(r"agent executor-\S+ \(executor\) \S+ -> running")

            # kill -9 the daemon: the web keeps answering, a new daemon takes over.
            os.kill(first, signal.SIGKILL)
            web = _child(serve, "researchagent.webserver")
            deadline = time.monotonic() + 60
            second = None
            while time.monotonic() < deadline and not second:
                assert client.get("/api/health").status_code in (200, 503)  # never refused
                pid = _daemon_pid(client)
                second = pid if pid and pid != first else None
                time.sleep(0.2)
            assert second, output.text
            assert (
                _child(serve, "researchagent.webserver").pid == web.pid
            )  # the web server was never stopped
            assert output.find(
                rf"runagentd \(pid {first}\) exited after \S+s with signal SIGKILL; restarting"
            ), output.text
            assert output.find(r"runagentd restarted \(pid \d+\)")
            wait_until(lambda: client.get("/api/health").status_code == 200, 30, 0.2)

            # `make chat`: the reply, a line for the loop it started, then the loop's end.
            chat = manage(
                "chat",
                "Which learning rate suits train.py?",
                "--mode",
                "wild",
                "--wait-reports",
                env=env,
                text=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
            said = chat.communicate(timeout=180)[0]
            assert chat.returncode == 0, said
            assert re.search(r"→ Research loop research-\w+ started: ", said), said
            assert re.search(r"\[report\] The research loop “.*” ended: done\. \(/research/", said)
            assert "<spawn_research>" not in said and "Traceback" not in said, said

            # A run still going when serve stops: said at shutdown, ended by `runs stop`.
            long = client.post(
                "/api/runs",
                json={"name": "long", "command": "sleep 300", "auto_start": True},
            ).json()
            wait_until(
                lambda: client.get(f"/api/runs/{long['id']}").json()["status"] == "running",
                60,
                0.2,
                "the long run to start",
            )
            run_dir = client.get(f"/api/runs/{long['id']}").json()["run_dir"]
            # `running` comes with the GPU claim; its command starts a moment later.
            wait_until(lambda: Path(run_dir, "job.pid").exists(), 30, 0.1, "its command")
        family = _everything(serve)
        serve.send_signal(signal.SIGINT)
        assert serve.wait(60) == 0, output.text
    finally:
        if serve.poll() is None:
            serve.kill()
    wait_until(lambda: output.find("Stopped."), 10)
    assert output.find(
        r"1 run is still running; they will be followed again on the next start; "
        r"`manage\.py runs stop --all` ends them"
    ), output.text
    assert not ACCESS_LOG_LINE.search(output.text), output.text
    # Nor a warning per event while no browser follows the feed (channels-postgres's own).
    assert "did you call group_add" not in output.text, output.text

    command_pid, started = map(int, (Path(run_dir) / "job.pid").read_text().split()[:2])
    run_session = session_members(command_pid, started)
    assert command_pid in run_session  # runs outlive serve on purpose
    left = [p for p in family if pid_alive(p) and p not in run_session]
    assert not left, [psutil.Process(p).cmdline() for p in left]
    stopper = manage(
        "runs",
        "stop",
        "--all",
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    said = stopper.communicate(timeout=120)[0]
    assert stopper.returncode == 0, said
    assert f"{long['id']}: stopped (its processes ended; no runagentd did it)" in said
    assert not any(pid_alive(p) for p in run_session)


@pytest.mark.timeout(300)  # serve and three daemon starts: 40-50 s on a fresh home here
def test_serve_gives_up_on_a_daemon_that_keeps_crashing(migrated_home):
    home, port = migrated_home, free_port()
    serve, output, _ = _serve(
        home,
        port,
        "--daemon-args=--host-name=not/valid",
        "--max-crashes=3",
        # Each crash comes seconds after its start here, over 30 s on a slow CI machine, where
        # a crash that late (not "fast") began the count again: a third restart, not two.
        "--fast-crash-seconds=300",
    )
    try:
        code = serve.wait(180)
    finally:
        if serve.poll() is None:
            serve.kill()
    assert code != 0
    assert (
        len(re.findall(r"runagentd \(pid \d+\) exited after .* with exit code", output.text)) == 2
    )
    assert output.find(
        r"runagentd crashed 3 times in a row, each within 300s of its start "
        r"\(last: exit code \d+\); giving up and stopping AgentSys"
    ), output.text
    assert output.find("Stopped.")
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=2)


def test_access_log_only_when_asked(agentsys_config):
    """AGENTSYS_ACCESS_LOG=true gives the web process an access log; by default it is off (the
    console of the first test above carries no request line)."""
    options = {"no_daemon": True, "daemon_args": "", "max_crashes": 5, "fast_crash_seconds": 30}
    default = Command()._plan(options)["web"].argv
    assert "--access-log" not in default
    agentsys_config(access_log=True)
    asked = Command()._plan(options)["web"].argv
    assert asked[asked.index("--access-log") + 1] == "-"
