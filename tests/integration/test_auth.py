"""Every page and API route needs a logged-in user or the API token."""

import re

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

pytestmark = pytest.mark.django_db

TOKEN = "t0ken-for-tests-0123456789abcdef"


def _all_paths(patterns=None, prefix=""):
    """Every URL the project serves, with path parameters filled with placeholder values."""
    for entry in patterns if patterns is not None else get_resolver().url_patterns:
        route = str(entry.pattern)
        if isinstance(entry, URLResolver):
            yield from _all_paths(entry.url_patterns, prefix + route)
        elif isinstance(entry, URLPattern):
            yield prefix + route


def _concrete(route: str) -> str:
    path = re.sub(r"<(?:\w+:)?(\w+)>", "1", route)  # path converters
    path = re.sub(r"\(\?P<\w+>[^)]*\)", "1", path)  # admin's regex routes
    path = path.replace("^", "").replace("$", "").replace("\\", "")
    return "/" + path


ROUTES = sorted({_concrete(r) for r in _all_paths()})
# The way in and out, the health probe (which tells an anonymous caller only ok/degraded) and
# the icon every browser asks for.
PUBLIC = {"/accounts/login/", "/admin/login/", "/accounts/logout/", "/api/health", "/favicon.ico"}
PROTECTED = [r for r in ROUTES if r not in PUBLIC]
API_ROUTES = [r for r in ROUTES if r.startswith("/api/") and r not in ("/api/", "/api/health")]


def test_route_list_covers_pages_admin_and_api():
    assert "/" in ROUTES
    assert "/admin/" in ROUTES
    assert "/api/hosts" in ROUTES
    assert "/api/sessions" in ROUTES
    assert len(ROUTES) > 50  # the admin alone contributes several per model


@pytest.mark.parametrize("path", PROTECTED)
def test_anonymous_gets_no_content(client, path):
    response = client.get(path)
    if response.status_code in (301, 302):
        assert "login" in response["Location"]
    else:
        assert response.status_code in (401, 403, 404, 405), (path, response.status_code)
        if response.status_code == 404:
            # Only where nothing is served: the API prefix itself, and the admin's
            # "view on site" shortcut given a made-up id.
            assert path == "/api/" or path.startswith("/admin/r/"), path


def test_login_page_is_public(client):
    response = client.get("/accounts/login/")
    assert response.status_code == 200
    assert b"csrfmiddlewaretoken" in response.content


def test_logged_in_user_sees_overview(admin_client):
    response = admin_client.get("/")
    assert response.status_code == 200
    for heading in (b"Running runs", b"Queue head", b"Open alerts", b"Hosts and GPUs"):
        assert heading in response.content


# Every page a person reaches from the nav or a link with no id in it (the admin included).
PAGES = [
    r
    for r in ROUTES
    if not r.startswith("/api/") and "/1" not in r and r not in ("/accounts/logout/",)
]


NAV = ["/", "/chat/", "/agents/", "/research/", "/runs/", "/queue/", "/alerts/", "/memory/"]


@pytest.mark.parametrize("path", PAGES)
def test_every_page_without_an_id_answers_a_logged_in_person_without_a_server_error(
    admin_client, path
):
    # 403/405 are answers too (an admin add form that is off, a POST-only route).
    response = admin_client.get(path)
    assert response.status_code < 500, (path, response.status_code)
    if path in NAV:
        assert response.status_code == 200, (path, response.status_code)


@pytest.mark.parametrize("path", API_ROUTES)
def test_api_answers_401_not_a_redirect(client, path):
    response = client.get(path)
    if response.status_code == 405:  # not a GET route: ask it the way it is used
        method = response["Allow"].split(",")[0].strip().lower()
        response = getattr(client, method)(path, {}, content_type="application/json")
    if path.startswith("/api/docs") or path.startswith("/api/openapi"):
        assert response.status_code in (302, 401)  # docs: the login page
    else:
        assert response.status_code == 401, path


def test_api_token_in_header_and_bearer(client, agentsys_config):
    agentsys_config(api_token=TOKEN)
    assert client.get("/api/hosts", HTTP_X_AUTH_TOKEN=TOKEN).status_code == 200
    assert client.get("/api/hosts", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 200
    assert client.get("/api/hosts", HTTP_X_AUTH_TOKEN=TOKEN + "x").status_code == 401
    assert client.get("/api/hosts", HTTP_AUTHORIZATION="Bearer nope").status_code == 401


def test_without_configured_token_no_token_is_accepted(client, agentsys_config):
    agentsys_config(api_token=None)
    assert client.get("/api/hosts", HTTP_X_AUTH_TOKEN="").status_code == 401
    assert client.get("/api/hosts", HTTP_X_AUTH_TOKEN="None").status_code == 401


def test_logged_in_session_reaches_the_api(admin_client):
    assert admin_client.get("/api/hosts").status_code == 200


def test_session_auth_needs_csrf_on_writes(django_user_model):
    from django.test import Client

    user = django_user_model.objects.create_user("ada", password="pw-1234567")
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    refused = client.post("/api/sessions", {"title": "x"}, content_type="application/json")
    assert refused.status_code == 403
    client.get("/")  # a page with a form: sets the csrftoken cookie
    token = client.cookies["csrftoken"].value
    accepted = client.post(
        "/api/sessions", {"title": "x"}, content_type="application/json", HTTP_X_CSRFTOKEN=token
    )
    assert accepted.status_code == 201


def test_token_writes_need_no_csrf(client, agentsys_config):
    agentsys_config(api_token=TOKEN)
    from django.test import Client

    strict = Client(enforce_csrf_checks=True)
    response = strict.post(
        "/api/sessions",
        {"title": "From a script", "mode": "wild"},
        content_type="application/json",
        HTTP_X_AUTH_TOKEN=TOKEN,
    )
    assert response.status_code == 201
    assert response.json()["mode"] == "wild"


def test_login_then_admin(client, django_user_model):
    from django.test import Client

    django_user_model.objects.create_superuser("root", password="correct horse battery")
    response = client.post(
        "/accounts/login/", {"username": "root", "password": "correct horse battery"}
    )
    assert response.status_code == 302
    assert client.get("/admin/").status_code == 200
    bad = Client().post("/accounts/login/", {"username": "root", "password": "nope"})
    assert b"didn&#x27;t match" in bad.content or b"didn't match" in bad.content
