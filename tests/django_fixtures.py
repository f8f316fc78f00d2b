"""The fixtures of the tests that run under Django (integration, browser, e2e): a plugin
that tests/conftest.py loads only when pytest-django is on, so tests/unit runs without
Django settings and without a database."""

import dataclasses

import pytest

from tests.opencode_fixtures import *  # noqa: F403  the real OpenCode + scripted model, on demand


@pytest.hookimpl(trylast=True)  # after pytest-django's own order (database tests, then none)
def pytest_collection_modifyitems(items):
    """For `make test` (pytest -n 2 --dist loadscope: a module's tests on one worker, in
    order): the tests that use no database (pytest-django puts them last; they start whole
    servers and child suites, the longest modules) go first, so that neither worker is left
    with a long one at the end while the other idles. The database tests keep their order."""
    items.sort(key=_uses_the_test_database)


def _uses_the_test_database(item) -> bool:
    fixtures = getattr(item, "fixturenames", ())
    return item.get_closest_marker("django_db") is not None or any(
        name in fixtures for name in ("db", "transactional_db", "django_db_setup")
    )


@pytest.fixture(autouse=True, scope="session")
def _cheap_password_hashes():
    """Passwords hashed at one PBKDF2 iteration in the test process (tests/fast_hasher.py)."""
    from django.test.utils import override_settings

    with override_settings(PASSWORD_HASHERS=["tests.fast_hasher.OneIterationPBKDF2"]):
        yield


def pytest_sessionstart(session):
    if _controls_workers(session.config):  # templates a killed session left
        from tests import template_db

        template_db.drop_templates(session.config, only_this_controller=False)
    if not hasattr(session.config, "workerinput"):  # and migrated homes
        from tests import embedded_homes

        embedded_homes.remove_migrated_homes(only_this_session=False)


def pytest_sessionfinish(session):
    if _controls_workers(session.config):
        from tests import template_db

        template_db.drop_templates(session.config, only_this_controller=True)
    if not hasattr(session.config, "workerinput"):
        from tests import embedded_homes

        embedded_homes.remove_migrated_homes(only_this_session=True)


def _controls_workers(config) -> bool:
    return not hasattr(config, "workerinput") and bool(getattr(config.option, "numprocesses", 0))


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix, request):
    """On an xdist worker, its test database is a copy of one migrated once for all the
    workers (tests/template_db.py)."""
    if hasattr(request.config, "workerinput"):
        from tests import template_db

        template_db.install()


@pytest.fixture(autouse=True, scope="session")
def _quick_flush():
    """The flush after each transactional test keeps the content types and permissions the
    migrations made (tests/quick_flush.py)."""
    from tests import quick_flush

    quick_flush.install()


@pytest.fixture
def agentsys_config(settings):
    """Replace fields of settings.AGENTSYS for one test: agentsys_config(api_token="t")."""

    def override(**changes):
        settings.AGENTSYS = dataclasses.replace(settings.AGENTSYS, **changes)
        return settings.AGENTSYS

    return override


@pytest.fixture(autouse=True)
def _plain_static_storage(settings):
    # The manifest storage needs `collectstatic` first (serve runs it); page tests do not.
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
    # The test client loads the middleware again for each Client, and WhiteNoise read and
    # stat-ed every collected file at each load (a sixth of the workers' CPU, py-spy): here it
    # looks a file up when a request asks for one. The web processes tests start are not
    # affected: they scan once, at their start, as in production.
    settings.WHITENOISE_AUTOREFRESH = True


@pytest.fixture(autouse=True)
def _skills_in_a_copy(settings, tmp_path_factory):
    """PUT /api/skills/{id} (the contract fuzz sends it too) edits a copy, never the repo."""
    import shutil

    from agentsys.research.settings import DEFAULT_SKILLS_DIR

    # Outside tmp_path, which some tests use as a project whose files they list.
    copy = tmp_path_factory.mktemp("skills") / "skills"
    settings.AGENTSYS_SKILLS_DIR = shutil.copytree(DEFAULT_SKILLS_DIR, copy)


@pytest.fixture
def embedded_home():
    """A fresh AGENTSYS_HOME for a test's own embedded PostgreSQL (tests/embedded_homes.py):
    its first start runs initdb, every migration and collectstatic."""
    import shutil

    from tests.embedded_homes import new_folder

    folder = new_folder()
    yield folder / "home"
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def migrated_home():
    """An AGENTSYS_HOME already migrated and collected, as a second start finds it: a copy of
    the session's (tests/embedded_homes.py), for tests whose subject is not the first start."""
    import shutil

    from tests.embedded_homes import copy_of_migrated_home, new_folder

    folder = new_folder()
    yield copy_of_migrated_home(folder / "home")
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def memory_channel_layer(settings):
    """An in-memory channel layer for sync tests that call async views through the test
    client or WSGI: each call runs on an event loop of its own, and channels-postgres keeps
    one module-global pool bound to the loop that opened it, so a pool opened by one call
    stalls the later ones (30 s PoolTimeouts). The ASGI server has one loop; this is the
    harness's problem, not the product's."""
    from channels.layers import channel_layers

    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    channel_layers.backends = {}
    yield
    channel_layers.backends = {}


@pytest.fixture
async def channel_layer_on_test_db(settings, django_db_setup):
    """The configured channel layer, talking to the test database.

    settings.CHANNEL_LAYERS names the real database ("agentsys"); channels-postgres opens its
    own connections from that config, so point it at the test database, where its tables are
    migrated. Its connection pool is a module global bound to the event loop that opened it:
    close it before this test's loop goes away."""
    import asyncio
    import copy

    import channels_postgres.db
    from channels.layers import channel_layers, get_channel_layer
    from django.db import connection

    layers = copy.deepcopy(settings.CHANNEL_LAYERS)
    config = layers["default"].get("CONFIG", {})
    if "NAME" in config:
        config["NAME"] = connection.settings_dict["NAME"]
    settings.CHANNEL_LAYERS = layers
    channel_layers.backends = {}
    # A feed cancelled when an earlier test's loop shut down may have opened a pool after
    # that test's teardown (leaving its group): bound to a closed loop, it would swallow this
    # test's sends. The lock that guards the pool's creation binds to the first loop that
    # contends for it: a new one for this loop.
    channels_postgres.db.connection_pool = None
    channels_postgres.db.is_creating_connection_pool = asyncio.Lock()
    yield get_channel_layer()
    pool, channels_postgres.db.connection_pool = channels_postgres.db.connection_pool, None
    if pool is not None:
        await pool.close()
    channel_layers.backends = {}


@pytest.fixture
async def close_db_connections():
    """For async tests with transaction=True: the thread asgiref runs ORM calls in keeps its
    connection open, and dropping the test database then waits ~5 s."""
    from asgiref.sync import sync_to_async
    from django.db import connections

    yield
    await sync_to_async(connections.close_all)()


API_TOKEN = "t0ken-for-tests-0123456789abcdef"


@pytest.fixture
def browser(client, django_user_model):
    """The test client logged in as a person ("ada", not staff), as a page sees them;
    `browser.user` is that user."""
    client.user = django_user_model.objects.create_user("ada", password="x" * 12)
    client.force_login(client.user)
    return client


@pytest.fixture
def api(client, agentsys_config):
    """Calls the REST API with a valid token: api("post", "/api/runs", {...}); `raw` sends
    a body as it is (malformed JSON)."""
    agentsys_config(api_token=API_TOKEN)

    def call(method, path, body=None, raw=None):
        kwargs = {"HTTP_X_AUTH_TOKEN": API_TOKEN}
        if body is not None or raw is not None:
            kwargs.update(content_type="application/json", data=raw if raw is not None else body)
        return getattr(client, method)(path, **kwargs)

    return call


@pytest.fixture(scope="module")
def chromium():
    """Debian's Chromium under Playwright, for a module of browser tests (tests/chromium.py)."""
    from playwright.sync_api import sync_playwright

    from tests.chromium import allow_orm_beside_playwright, collect_static, launch_chromium

    collect_static()
    with allow_orm_beside_playwright(), sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def module_web(chromium, django_db_setup, django_db_blocker):
    """One daphne for a module's page tests, on the worker's test database. A start costs a
    second of CPU (2-6 s of a test's time on a busy machine) and the web keeps nothing of a
    test's rows in memory: each test's rows are flushed after it, the web reads the next
    test's as any page would.

    At the module's end it is stopped with a live page open: whatever a page has in flight
    (the live feed, a poll) must not keep the web process from exiting."""
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


def _logged_in_page(chromium, base_url: str, *, timeout_ms: int = 15_000):
    """The page tests' person, made, and a Chromium context at 1280 px logged in as them by the
    session cookie a login would set (the login page itself is tested in test_auth)."""
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.test import Client

    from tests.chromium import PASSWORD, USER

    user = get_user_model().objects.create_user(USER, password=PASSWORD)
    client = Client()
    client.force_login(user)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME]
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    context.add_cookies(
        [{"name": cookie.key, "value": cookie.value, "url": base_url, "httpOnly": True}]
    )
    page = context.new_page()
    page.set_default_timeout(timeout_ms)
    return context, page


@pytest.fixture
def site(chromium, module_web, transactional_db):
    """The module's daphne and a page logged in at 1280 px, on a context of this test's own:
    (base url, page)."""
    context, page = _logged_in_page(chromium, module_web.url)
    yield module_web.url, page
    context.close()


@pytest.fixture
def site_in_workdir(chromium, workdir):
    """A daphne whose AGENTSYS_WORKDIR is the module's `workdir` fixture, and a logged-in
    Chromium page at 1280 px: (base url, browser context, page)."""
    from tests.live_clients import Web

    web = Web(AGENTSYS_WORKDIR=str(workdir))
    context, page = _logged_in_page(chromium, web.url, timeout_ms=20_000)
    yield web.url, context, page
    # Stopped with the pages still open: what they have in flight must not hold it up.
    web.stop()
    assert web.process.returncode == 0, "the web process needed its stop watchdog"
    context.close()


@pytest.fixture
def daemon():
    """A runagentd with one declared GPU (index 0)."""
    from tests.runtime_harness import DaemonProcess

    started = DaemonProcess("ui-host", AGENTSYS_GPUS="1")
    yield started
    if started.process.poll() is None:
        started.stop()


@pytest.fixture
def latest_schema_after():
    """For a test that migrates the database back: every migration applied again after it,
    as the tests after it expect."""
    from django.contrib.contenttypes.models import ContentType

    from tests.helpers import migrate

    yield
    migrate()
    ContentType.objects.clear_cache()
