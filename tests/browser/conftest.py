"""One Chromium and one daphne for the page tests a worker runs one after another.

Each browser module launched its own Chromium (with Playwright's driver) and daphne: ~3 CPU-s
a module, on a suite short of CPU. The modules are two xdist groups (tests/conftest.py), so a
worker runs a group's modules back to back and these package-scoped fixtures live through
them; they end when the worker turns to a module outside tests/browser (Playwright keeps an
asyncio loop running in the test's thread, which the other tests must not meet)."""

import pytest

from tests.django_fixtures import _logged_in_page


@pytest.fixture(scope="package")
def chromium():
    """Debian's Chromium under Playwright (tests/chromium.py)."""
    from playwright.sync_api import sync_playwright

    from tests.chromium import allow_orm_beside_playwright, collect_static, launch_chromium

    collect_static()
    with allow_orm_beside_playwright(), sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        yield browser
        browser.close()


@pytest.fixture(scope="package")
def browser_web(chromium, django_db_setup, django_db_blocker):
    """One daphne for the page tests, on the worker's test database. The web keeps nothing of
    a test's rows in memory: each test's rows are flushed after it, the web reads the next
    test's as any page would.

    At the end it is stopped with a live page open: whatever a page has in flight (the live
    feed, a poll) must not keep the web process from exiting."""
    from tests.live_clients import Web

    web = Web()
    yield web
    with django_db_blocker.unblock():
        context, page = _logged_in_page(chromium, web.url)
    page.goto(f"{web.url}/")  # the overview: its live feed and polls in flight
    web.stop()
    assert web.process.returncode == 0, "the web process needed its stop watchdog"
    context.close()
    with django_db_blocker.unblock():  # its person, made outside any test: gone again
        from django.contrib.auth import get_user_model
        from django.db import connections

        from tests.chromium import USER

        get_user_model().objects.filter(username=USER).delete()
        connections.close_all()  # else dropping the test database waits on it
