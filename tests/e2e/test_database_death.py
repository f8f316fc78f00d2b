"""`kill -9` of the embedded PostgreSQL's postmaster (issue 34, item 2), on a server of this
module's own (its own AGENTSYS_HOME), so the suite's database is never touched:

- the web answers at once while the database is away: /api/health 503 saying what and since
  when, its banner variant 200, every other route 503 with the banner, each within 1 s.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from config.embedded_db import EmbeddedPostgres
from tests.chromium import ARTIFACTS, launch_chromium
from tests.helpers import PYTHON, REPO, child_env, free_port, wait_until

pytestmark = pytest.mark.slow

TOKEN = "database-death-token"
ANSWER_SECONDS = 1.0  # the promise while the database is away


@pytest.fixture(scope="module")
def home():
    """A migrated AGENTSYS_HOME with its own embedded PostgreSQL, for the whole module (one
    migrate); like tests/django_fixtures.embedded_home, outside pytest's tmp root."""
    folder = Path(tempfile.mkdtemp(prefix="agentsys-dbdeath-"))
    folder.chmod(0o755)
    home = folder / "home"
    env = _env(home)
    subprocess.run([PYTHON, "manage.py", "migrate", "-v0"], cwd=REPO, env=env, check=True)
    # The outage page's stylesheet, under this home (STATIC_ROOT), served from daphne's start.
    collect = [PYTHON, "manage.py", "collectstatic", "--noinput", "-v0"]
    subprocess.run(collect, cwd=REPO, env=env, check=True)
    yield home
    server = EmbeddedPostgres(home)
    if server.running_pid() is not None:
        server.stop_server()
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def server(home):
    """The module's server, running at the test's start and again at its end."""
    server = EmbeddedPostgres(home)
    server.start_server()
    yield server
    server.start_server()


def _env(home: Path, **overrides) -> dict[str, str]:
    return child_env(
        AGENTSYS_HOME=str(home),
        DATABASE_URL=None,
        RESEARCH_AGENT_USER_AUTH_TOKEN=TOKEN,
        AGENTSYS_WORKDIR=None,
        **overrides,
    )


def _kill_postmaster(server: EmbeddedPostgres) -> float:
    pid = server.running_pid()
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    return time.monotonic()


def _timed(call):
    started = time.monotonic()
    response = call()
    return response, time.monotonic() - started


def _web(home: Path, port: int) -> subprocess.Popen:
    argv = [PYTHON, "-m", "config.webserver", "-p", str(port), "--processes", "1"]
    return subprocess.Popen(argv, cwd=REPO, env=_env(home))


def test_the_web_answers_at_once_while_the_database_is_away(home, server):
    port = free_port()
    web = _web(home, port)
    base = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=base, headers={"X-Auth-Token": TOKEN}, timeout=60) as client:
            wait_until(lambda: _answers(client), 60, 0.2, "the web to answer")
            _kill_postmaster(server)
            # The watch notices within a tick; from then on nothing waits.
            wait_until(lambda: "unreachable" in client.get("/api/health").text, 5, 0.05)
            health, took = _timed(lambda: client.get("/api/health"))
            assert health.status_code == 503 and took < ANSWER_SECONDS, (health, took)
            body = health.json()
            assert body["status"] == "degraded" and body["database"]["ok"] is False, body
            assert re.match(
                r"The database is unreachable since \d\d:\d\d:\d\d UTC", body["problems"][0]
            )
            assert body["database"]["down_since"], body
            banner, took = _timed(lambda: client.get("/api/health?banner=true"))
            assert banner.status_code == 200 and took < ANSWER_SECONDS, (banner, took)
            assert banner.json()["database"]["down_since"] == body["database"]["down_since"]
            runs, took = _timed(lambda: client.post("/api/runs", json={"command": "true"}))
            assert runs.status_code == 503 and took < ANSWER_SECONDS, (runs, took)
            assert "unreachable since" in runs.json()["detail"]
            page, took = _timed(lambda: client.get("/runs/"))
            assert page.status_code == 503 and took < ANSWER_SECONDS, (page, took)
            assert 'id="database-banner"' in page.text and "unreachable since" in page.text
            _screenshots(base)

            server.start_server()
            back = time.monotonic()
            created = wait_until(
                lambda: _created(client, {"name": "after", "command": "true"}), 10, 0.05
            )
            print(f"\nfirst 201 {time.monotonic() - back:.2f}s after the server was back")
            assert created.status_code == 201
            assert client.get("/api/health").json()["database"]["ok"] is True
    finally:
        web.terminate()
        web.wait(15)


def _answers(client: httpx.Client) -> bool:
    try:
        return client.get("/api/health").status_code in (200, 503)
    except httpx.TransportError:
        return False


def _created(client: httpx.Client, body: dict) -> httpx.Response | None:
    response = client.post("/api/runs", json=body)
    return response if response.status_code == 201 else None


def _screenshots(base: str) -> None:
    """The page every route shows while the database is away, at 1280 and 390 px."""
    from playwright.sync_api import sync_playwright

    folder = ARTIFACTS / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            for name, width in (("database-down", 1280), ("database-down-phone", 390)):
                page = browser.new_page(viewport={"width": width, "height": 700})
                page.goto(f"{base}/runs/")
                assert page.locator("#database-banner").is_visible()
                page.screenshot(path=str(folder / f"{name}.png"), full_page=True)
                page.close()
        finally:
            browser.close()
