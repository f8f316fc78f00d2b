"""`make run` on a fresh state folder: sets up, serves, tells how to log in, stops clean."""

import os
import re
import signal
import subprocess
import threading
import time

import httpx
import psutil
import pytest

from researchagent.embedded_db import EmbeddedPostgres
from tests.helpers import REPO, child_env, free_port, pid_alive, wait_until

pytestmark = pytest.mark.slow


class OutputReader:
    """Collects a child's output on a thread so the test can wait for a line."""

    def __init__(self, stream):
        self.lines: list[str] = []
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream):
        for line in stream:
            self.lines.append(line.rstrip("\n"))

    def find(self, pattern: str) -> re.Match | None:
        return next((m for line in self.lines if (m := re.search(pattern, line))), None)

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


def _login(client: httpx.Client, username: str, password: str) -> httpx.Response:
    page = client.get("/accounts/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    return client.post(
        "/accounts/login/",
        data={"username": username, "password": password, "csrfmiddlewaretoken": token},
        headers={"Referer": str(client.base_url) + "/accounts/login/"},
    )


# A fresh home: initdb, every migration, OpenCode: about a minute here, three on a busy CI
# machine (the suite's 120 s guard is for tests that take seconds).
@pytest.mark.timeout(360)
def test_make_run_serves_login_and_admin_then_stops_clean(embedded_home):
    home, port = embedded_home, free_port()
    env = child_env(
        AGENTSYS_HOME=str(home),
        PORT=str(port),
        DATABASE_URL=None,
        AGENTSYS_ADMIN_PASSWORD=None,
        AGENTSYS_WORKDIR=None,
    )
    make = subprocess.Popen(
        ["make", "run"],
        cwd=REPO,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    output = OutputReader(make.stdout)
    family: list[int] = []
    try:
        # The banner's last line: the lines are written one by one, and a reader may see
        # "running at" before the login and token lines are out.
        wait_until(
            lambda: output.find("Ctrl-C stops everything"),
            300,
            interval=0.2,
            message="the start-up banner",
        )
        url = output.find(r"running at (http://\S+)").group(1)
        assert url == f"http://127.0.0.1:{port}/"
        login = output.find(r"Log in as '(\w+)' with the one-time password: (\S+)")
        assert login, output.text
        token = output.find(r"API token for 'admin' \(shown only this once\): (\S+)")
        assert token, output.text  # printed next to the password; the curl line: see
        # tests/e2e/test_serve_supervision.py, which runs it
        assert (home / "demo-workspace" / "train.py").exists()
        assert (home / "demo-workspace" / ".git").is_dir()

        family = [p.pid for p in psutil.Process(make.pid).children(recursive=True)]
        postmaster = EmbeddedPostgres(home).running_pid()
        assert postmaster is not None
        family.append(postmaster)
        names = " ".join(" ".join(psutil.Process(p).cmdline()) for p in family)
        assert "researchagent.webserver" in names and "runagentd" in names

        with httpx.Client(base_url=url.rstrip("/"), timeout=10) as client:
            assert client.get("/").status_code == 302  # to the login page
            assert client.get("/accounts/login/").status_code == 200
            assert _login(client, *login.groups()).status_code == 302
            admin = client.get("/admin/")
            assert admin.status_code == 200
            assert "Site administration" in admin.text or "AgentSys administration" in admin.text
            assert client.get("/static/css/app.css").status_code == 200  # collected and served
        hosts = httpx.get(url + "api/hosts", headers={"X-Auth-Token": token.group(1)}, timeout=10)
        assert hosts.status_code == 200
    finally:
        make.send_signal(signal.SIGTERM)
        make.wait(60)
    wait_until(
        lambda: not any(pid_alive(p) for p in family),
        20,
        message=f"every process to exit: {[p for p in family if pid_alive(p)]}",
    )
    assert "Stopped." in output.text
    assert EmbeddedPostgres(home).running_pid() is None


@pytest.mark.timeout(360)  # as above, but a home migrated before
def test_make_run_is_gone_within_5s_of_ctrl_c_with_requests_in_flight(migrated_home):
    """Ctrl-C (SIGTERM to the terminal's process group) while an SSE feed, a wild-mode chat
    stream and `GET /api/models` wait on an OpenCode that never answers: everything exits,
    nothing is killed for ignoring the signal, and the embedded PostgreSQL is stopped."""
    from tests.e2e.test_web_stop import BlackHole

    hole = BlackHole()
    hole.start()
    home, port = migrated_home, free_port()
    env = child_env(
        AGENTSYS_HOME=str(home),
        PORT=str(port),
        DATABASE_URL=None,
        AGENTSYS_WORKDIR=None,
        OPENCODE_URL=f"http://127.0.0.1:{hole.port}",
    )
    make = subprocess.Popen(
        ["make", "run"],
        cwd=REPO,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group, as a terminal gives it
    )
    output = OutputReader(make.stdout)
    try:
        wait_until(lambda: output.find("Ctrl-C stops everything"), 300, 0.2, "the banner")
        token = output.find(r"API token for 'admin' \(shown only this once\): (\S+)").group(1)
        family = [p.pid for p in psutil.Process(make.pid).children(recursive=True)]
        family.append(EmbeddedPostgres(home).running_pid())
        took = _ctrl_c_with_requests_in_flight(make, f"http://127.0.0.1:{port}", token, hole)
    finally:
        if make.poll() is None:
            os.killpg(make.pid, signal.SIGKILL)
        hole.close()
    print(f"make run gone {took:.2f}s after Ctrl-C with 3 requests in flight")
    assert took < 5.0, output.text
    assert not [p for p in family if pid_alive(p)], output.text
    assert "Stopped." in output.text
    assert "killing it" not in output.text and "left behind" not in output.text, output.text
    assert EmbeddedPostgres(home).running_pid() is None


def _ctrl_c_with_requests_in_flight(make, url: str, token: str, hole) -> float:
    headers = {"X-Auth-Token": token}
    with httpx.Client(base_url=url, headers=headers, timeout=30) as api:
        session = api.post("/api/sessions", json={"title": "ctrl-c"}).json()["id"]
    in_flight: dict[str, threading.Event] = {k: threading.Event() for k in ("sse", "chat")}
    ended: dict[str, str] = {}

    def follow(name, method, path, body=None):
        try:
            with (
                httpx.Client(base_url=url, headers=headers, timeout=30) as client,
                client.stream(method, path, json=body) as answer,
            ):
                for _ in answer.iter_lines():
                    in_flight[name].set()
            ended[name] = "cleanly"
        except httpx.HTTPError as error:
            ended[name] = repr(error)

    def models():
        try:
            ended["models"] = str(httpx.get(f"{url}/api/models", headers=headers).status_code)
        except httpx.HTTPError as error:
            ended["models"] = repr(error)

    clients = [
        threading.Thread(target=follow, args=("sse", "GET", "/api/agents/events")),
        threading.Thread(
            target=follow,
            args=("chat", "POST", "/api/chat", {"session_id": session, "message": "hi"}),
        ),
        threading.Thread(target=models),
    ]
    for client in clients:
        client.daemon = True
        client.start()
    for name, event in in_flight.items():
        assert event.wait(20), f"{name} never streamed"
    wait_until(lambda: len(hole.accepted) >= 2, 20, message="the model and the chat at OpenCode")
    assert not ended, ended
    started = time.monotonic()
    os.killpg(make.pid, signal.SIGTERM)
    make.wait(30)
    took = time.monotonic() - started
    for client in clients:
        client.join(5)
    assert ended.get("sse") == "cleanly" and ended.get("chat") == "cleanly", ended
    return took
