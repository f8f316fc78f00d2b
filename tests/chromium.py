"""Playwright (Python) driving Debian's Chromium against a real daphne, for the page tests.

`make test` installs Chromium (apt) when /usr/bin/chromium is missing; Playwright's own browser
download is never used. Screenshots of every page a test visits are saved under
`test-artifacts/screenshots/` (AGENTSYS_TEST_ARTIFACTS overrides), for a person to look at."""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path

from tests.helpers import PYTHON, REPO, child_env

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
ARTIFACTS = Path(os.environ.get("AGENTSYS_TEST_ARTIFACTS", REPO / "test-artifacts"))
USER, PASSWORD = "ada", "correct horse battery"


def collect_static() -> None:
    """The manifest storage daphne serves needs collectstatic, as `make run` does. `make test`
    collects once before its workers start (AGENTSYS_TEST_STATIC_COLLECTED): a collect while
    another worker's daphne reads the manifest could fail that worker's pages."""
    if os.environ.get("AGENTSYS_TEST_STATIC_COLLECTED"):
        return
    subprocess.run(
        [PYTHON, "manage.py", "collectstatic", "--noinput", "--verbosity", "0"],
        cwd=REPO,
        env=child_env(),
        check=True,
        timeout=120,
    )


@contextlib.contextmanager
def allow_orm_beside_playwright():
    """Playwright's sync API keeps an asyncio loop running in the test's thread, which makes
    Django refuse the test's own (sequential, synchronous) ORM calls; allow them there."""
    before = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = before


def launch_chromium(playwright):
    return playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)


def log_in(page, base_url: str) -> None:
    page.goto(f"{base_url}/accounts/login/")
    page.get_by_label("User name").fill(USER)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{base_url}/")


def chat_ready(page) -> None:
    """Wait until the chat page's script runs (it follows the session's socket once the DOM is
    ready): an Enter pressed before that is only a new line in the box. A person never types
    that fast; a test on a busy machine does."""
    page.wait_for_function("() => window.AgentSysChat !== undefined")


def screenshot(page, name: str) -> Path:
    folder = ARTIFACTS / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def off_the_page_thread(function, /, **kwargs):
    """Call `function` in a thread of its own and return its result. Playwright's loop runs in
    the test's thread, where a live publish (async_to_sync) is refused: an alert raised from
    there would reach the database but not the open pages."""
    import threading

    from django.db import connection

    result, failure = [], []

    def call():
        try:
            result.append(function(**kwargs))
        except BaseException as error:
            failure.append(error)
        finally:
            connection.close()

    worker = threading.Thread(target=call)
    worker.start()
    worker.join(60)
    if failure:
        raise failure[0]
    return result[0]
