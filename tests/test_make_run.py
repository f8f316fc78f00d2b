"""`make run` on a fresh state folder: sets up, serves, tells how to log in, stops clean."""

import re
import signal
import subprocess
import threading

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


def test_make_run_serves_login_and_admin_then_stops_clean(tmp_path):
    home, port = tmp_path / "home", free_port()
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
        wait_until(
            lambda: output.find("AgentSys is running at"),
            120,
            interval=0.2,
            message="the start-up banner",
        )
        url = output.find(r"running at (http://\S+)").group(1)
        assert url == f"http://127.0.0.1:{port}/"
        login = output.find(r"Log in as '(\w+)' with the one-time password: (\S+)")
        assert login, output.text
        token = output.find(r"API token for 'admin' \(shown only this once\): (\S+)")
        assert token, output.text  # printed next to the password; the curl line: see
        # tests/test_serve_supervision.py, which runs it
        assert (home / "demo-workspace" / "train.py").exists()
        assert (home / "demo-workspace" / ".git").is_dir()

        family = [p.pid for p in psutil.Process(make.pid).children(recursive=True)]
        postmaster = EmbeddedPostgres(home).running_pid()
        assert postmaster is not None
        family.append(postmaster)
        names = " ".join(" ".join(psutil.Process(p).cmdline()) for p in family)
        assert "daphne" in names and "runagentd" in names

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
