"""Every error under /api/ is JSON `{"detail": ...}`, whatever answered it (issue 18: unknown
routes were Django's HTML 404), and /favicon.ico leads to the app's icon (it was a 404)."""

from __future__ import annotations

import pytest
from django.contrib.staticfiles import finders

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "path", ["/api/nope", "/api/runs/r1/no-such-action/x", "/api/agents/events/extra"]
)
def test_an_unknown_api_route_is_a_json_404_naming_it(api, path):
    response = api("get", path)
    assert response.status_code == 404
    assert response["Content-Type"].startswith("application/json")
    assert response.json() == {
        "detail": f"No API route {path!r}; the routes are listed at /api/docs"
    }


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("delete", "/api/hosts", "GET"),  # a ninja route
        ("put", "/api/chat", "POST"),
        ("post", "/api/agents/events", "GET"),  # the event stream, a view outside ninja
    ],
)
def test_a_wrong_method_is_a_json_405_that_keeps_allow(api, method, path, allowed):
    response = api(method, path)
    assert response.status_code == 405
    assert response["Allow"] == allowed
    assert response.json() == {
        "detail": f"{method.upper()} is not allowed on {path}; it takes {allowed}"
    }


def test_an_unknown_route_answers_json_without_credentials_too(client):
    response = client.get("/api/nope")
    assert response.status_code == 404
    assert "detail" in response.json()


def test_pages_outside_the_api_keep_their_html_404(admin_client):
    response = admin_client.get("/no-such-page/")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")


def test_favicon_ico_leads_to_the_apps_icon_without_logging_in(client):
    response = client.get("/favicon.ico")
    assert response.status_code == 302
    assert response["Location"] == "/static/favicon.svg"
    icon = finders.find("favicon.svg")
    assert icon is not None
    with open(icon, encoding="utf-8") as svg:
        assert svg.read().startswith("<svg")
