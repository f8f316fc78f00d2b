"""GET /api/models asks the real OpenCode server which models it offers (issue 11 item 1)."""

from __future__ import annotations

import dataclasses

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.django_db]


def test_the_models_come_from_opencode(api, settings, opencode_server):
    settings.AGENTSYS = dataclasses.replace(
        settings.AGENTSYS,
        opencode_url=opencode_server.url,
        opencode_password=opencode_server.password,
    )
    response = api("get", "/api/models")
    assert response.status_code == 200, response.content
    body = response.json()
    rows = {(m["provider"], m["model"]) for m in body["models"]}
    assert (opencode_server.provider, opencode_server.model) in rows
    assert body["default"] == {
        "provider": settings.AGENTSYS.model_provider,
        "model": settings.AGENTSYS.model_id,
    }


def test_a_wrong_password_or_no_server_is_a_503_that_says_why(api, settings, opencode_server):
    settings.AGENTSYS = dataclasses.replace(
        settings.AGENTSYS, opencode_url=opencode_server.url, opencode_password="wrong"
    )
    response = api("get", "/api/models")
    assert response.status_code == 503 and "OPENCODE_SERVER_PASSWORD" in response.json()["detail"]
    settings.AGENTSYS = dataclasses.replace(
        settings.AGENTSYS, opencode_url="http://127.0.0.1:9", opencode_password=""
    )
    response = api("get", "/api/models")
    assert response.status_code == 503 and "unreachable" in response.json()["detail"]
