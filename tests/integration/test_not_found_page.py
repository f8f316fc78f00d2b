"""An unknown page is the site's own page, with its style and nav, saying what was not found
(issue 34); an unknown API route still answers JSON."""

import pytest

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("path", ["/no-such-page/", "/research/orchestrator-none/"])
def test_an_unknown_page_is_styled_with_the_nav(browser, path):
    response = browser.get(path)
    assert response.status_code == 404
    page = response.content.decode()
    assert "<title>Page not found · AgentSys</title>" in page
    assert '<nav aria-label="Main">' in page and "/static/css/app" in page
    assert f"<code>{path}</code>" in page


def test_a_path_with_markup_is_shown_as_text(browser):
    page = browser.get("/<script>alert(1)</script>/").content.decode()
    assert "<script>alert(1)" not in page and "<code>/%3Cscript%3Ealert" in page


def test_an_unknown_api_route_still_answers_json(browser):
    response = browser.get("/api/no-such-route")
    assert response.status_code == 404 and "No API route" in response.json()["detail"]
