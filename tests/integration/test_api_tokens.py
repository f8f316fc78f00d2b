"""Per-user API tokens: stored hashed, named, revocable, last-used time, shown once; accepted
in X-Auth-Token and Bearer as their owner, on the REST API, the WebSocket and SSE."""

from __future__ import annotations

import hashlib
import io
import re
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from accounts_app import services
from accounts_app.models import ApiToken
from researchagent import bootstrap
from sessions_app.models import ChatSession

pytestmark = pytest.mark.django_db


@pytest.fixture
def ada(django_user_model):
    return django_user_model.objects.create_user("ada", password="pw-1234567")


def test_token_is_stored_only_as_its_digest(ada):
    row, token = services.create_token(user=ada, name="laptop")
    assert token.startswith("ast_") and len(token) > 40
    stored = ApiToken.objects.get(pk=row.pk)
    assert stored.digest == hashlib.sha256(token.encode()).hexdigest()
    assert token not in str(ApiToken.objects.filter(pk=row.pk).values().get())
    assert stored.prefix == token[:10] and stored.name == "laptop"


def test_token_acts_as_its_owner_in_header_and_bearer(client, ada, django_user_model):
    _, token = services.create_token(user=ada, name="scripts")
    other = django_user_model.objects.create_user("bob", password="pw-1234567")
    ChatSession.objects.create(title="bob's", owner=other)
    strict = Client(enforce_csrf_checks=True)  # a token needs no CSRF token
    created = strict.post(
        "/api/sessions", {"title": "mine"}, content_type="application/json", HTTP_X_AUTH_TOKEN=token
    )
    assert created.status_code == 201, created.content
    assert ChatSession.objects.get(pk=created.json()["id"]).owner == ada
    listed = client.get("/api/sessions", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert listed.status_code == 200
    assert [s["title"] for s in listed.json()] == ["mine"]  # not bob's


def test_revoked_token_and_inactive_owner_are_refused(client, ada):
    row, token = services.create_token(user=ada, name="old")
    assert client.get("/api/hosts", HTTP_X_AUTH_TOKEN=token).status_code == 200
    services.revoke_token(token_id=row.pk)
    assert client.get("/api/hosts", HTTP_X_AUTH_TOKEN=token).status_code == 401
    _, second = services.create_token(user=ada, name="new")
    ada.is_active = False
    ada.save()
    assert client.get("/api/hosts", HTTP_AUTHORIZATION=f"Bearer {second}").status_code == 401
    assert client.get("/api/hosts", HTTP_X_AUTH_TOKEN=second + "x").status_code == 401


def test_last_used_is_written_at_most_once_a_minute(client, ada):
    row, token = services.create_token(user=ada, name="probe")
    assert row.last_used_at is None
    client.get("/api/hosts", HTTP_X_AUTH_TOKEN=token)
    first = ApiToken.objects.get(pk=row.pk).last_used_at
    assert first is not None
    client.get("/api/hosts", HTTP_X_AUTH_TOKEN=token)
    assert ApiToken.objects.get(pk=row.pk).last_used_at == first  # no write per request
    ApiToken.objects.filter(pk=row.pk).update(last_used_at=first - timedelta(minutes=2))
    client.get("/api/hosts", HTTP_X_AUTH_TOKEN=token)
    assert ApiToken.objects.get(pk=row.pk).last_used_at > first - timedelta(seconds=1)


def test_env_token_keeps_working_beside_user_tokens(client, agentsys_config, ada):
    agentsys_config(api_token="env-token-0123456789abcdefghij")
    services.create_token(user=ada, name="x")
    answer = client.get("/api/hosts", HTTP_X_AUTH_TOKEN="env-token-0123456789abcdefghij")
    assert answer.status_code == 200


def test_admin_shows_the_token_once_after_creation(admin_client, ada):
    page = admin_client.post(
        "/admin/accounts_app/apitoken/add/", {"user": ada.pk, "name": "from the admin"}
    )
    assert page.status_code == 200
    token = re.search(r'id="api-token"[^>]*>(ast_[\w-]+)<', page.content.decode()).group(1)
    row = ApiToken.objects.get(name="from the admin")
    assert row.user == ada and row.digest == services.digest_of(token)
    assert Client().get("/api/hosts", HTTP_X_AUTH_TOKEN=token).status_code == 200
    change = admin_client.get(f"/admin/accounts_app/apitoken/{row.pk}/change/")
    listing = admin_client.get("/admin/accounts_app/apitoken/")
    assert token not in change.content.decode() and token not in listing.content.decode()
    assert row.prefix in listing.content.decode()
    admin_client.post(
        "/admin/accounts_app/apitoken/",
        {"action": "revoke", "_selected_action": [row.pk]},
    )
    assert ApiToken.objects.get(pk=row.pk).revoked_at is not None


def test_manage_command_creates_lists_and_revokes(ada):
    out, err = io.StringIO(), io.StringIO()
    call_command("apitoken", "create", "--user", "ada", "--name", "cli", stdout=out, stderr=err)
    token = out.getvalue().strip()
    assert "shown only this once" in err.getvalue()
    row = ApiToken.objects.get(name="cli")
    assert row.digest == services.digest_of(token)
    listing = io.StringIO()
    call_command("apitoken", "list", stdout=listing)
    assert (
        f"{row.pk}\tada\tcli\t{row.prefix}" in listing.getvalue()
        and token not in listing.getvalue()
    )
    call_command("apitoken", "revoke", str(row.pk), stdout=io.StringIO())
    assert ApiToken.objects.get(pk=row.pk).revoked_at is not None
    with pytest.raises(CommandError, match="no user named"):
        call_command("apitoken", "create", "--user", "nobody", "--name", "x")
    with pytest.raises(CommandError, match="needs a name"):
        call_command("apitoken", "create", "--user", "ada", "--name", " ")


def test_first_start_creates_a_token_for_the_admin_and_later_starts_do_not(agentsys_config):
    agentsys_config(admin_password=None)
    login = bootstrap.ensure_admin_user()
    token = bootstrap.ensure_admin_token(login)
    assert token and Client().get("/api/hosts", HTTP_X_AUTH_TOKEN=token).status_code == 200
    again = bootstrap.ensure_admin_user()
    assert bootstrap.ensure_admin_token(again) is None
    assert ApiToken.objects.count() == 1
    line = bootstrap.demo_run_curl("http://127.0.0.1:8000/", token)
    assert line.startswith(f"curl -H 'X-Auth-Token: {token}' ")
    assert line.endswith(" http://127.0.0.1:8000/api/runs") and '"auto_start":true' in line
    # The real server runs this very line: tests/e2e/test_serve_supervision.py.
