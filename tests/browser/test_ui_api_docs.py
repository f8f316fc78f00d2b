"""The API reference a script author opens (`/api/docs`, Swagger UI) in Chromium against a real
daphne: it renders every operation of the schema, from the app's own static files, with no
error in the console (issue 18 item 2: a duplicated key made it "Unable to render")."""

from __future__ import annotations

from urllib.parse import urlparse

import pytest
from playwright.sync_api import expect

from researchagent.api import api
from tests.chromium import screenshot

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _operations() -> set[tuple[str, str]]:
    schema = api.get_openapi_schema(path_prefix="/api/")
    return {(method.upper(), path) for path, ops in schema["paths"].items() for method in ops}


def test_the_docs_page_lists_every_operation_with_no_console_error(site):
    url, page = site
    errors, elsewhere = [], []
    page.on("console", lambda message: message.type == "error" and errors.append(message.text))
    page.on("pageerror", lambda error: errors.append(str(error)))
    host = urlparse(url).netloc
    page.on(
        "request",
        lambda request: (
            urlparse(request.url).netloc not in (host, "") and elsewhere.append(request.url)
        ),
    )
    page.goto(f"{url}/api/docs")
    expected = _operations()
    blocks = page.locator(".opblock-summary")
    expect(blocks).to_have_count(len(expected))
    shown = {
        (
            block.locator(".opblock-summary-method").inner_text().strip(),
            block.locator(".opblock-summary-path").get_attribute("data-path"),
        )
        for block in blocks.all()
    }
    assert shown == expected
    expect(page.get_by_text("Unable to render this definition")).to_have_count(0)
    # The chat stream's one 200 names its media type.
    chat = page.locator("#operations-chat-sessions_app_chat_api_chat")
    chat.locator(".opblock-summary").click()
    expect(chat.locator(".responses-wrapper")).to_contain_text("application/x-ndjson")
    screenshot(page, "api-docs")
    page.set_viewport_size({"width": 390, "height": 844})
    screenshot(page, "api-docs-phone")
    assert errors == []
    assert elsewhere == []  # Swagger UI's assets are the app's own (no CDN)


def test_favicon_ico_is_the_apps_icon_from_the_real_server(site):
    url, page = site
    response = page.goto(f"{url}/favicon.ico")
    assert response.ok
    assert response.headers["content-type"].startswith("image/svg+xml")
    assert page.url.startswith(f"{url}/static/favicon.")  # the hashed file collectstatic made


def test_the_home_page_says_what_is_down_with_no_console_error(site):
    url, page = site
    errors = []
    page.on("console", lambda message: message.type == "error" and errors.append(message.text))
    with page.expect_response(lambda response: "/api/health" in response.url) as health:
        page.goto(f"{url}/")
    assert health.value.status == 200  # degraded, said in the body: no runagentd here
    expect(page.locator("#health-banner")).to_contain_text("runagentd")
    assert errors == []
