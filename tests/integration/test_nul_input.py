"""PostgreSQL stores no NUL character: a request carrying one gets a 400 saying where (not a
500 from the database), and agents' JSON has it replaced instead of losing the record."""

import pytest

from common.json_safe import json_safe
from memory_app.models import MemoryEntry
from runtime_app.memory_view import DjangoMemoryView

pytestmark = pytest.mark.django_db
TOKEN = "t0ken-for-tests-0123456789abcdef"


@pytest.fixture
def auth(agentsys_config):
    agentsys_config(api_token=TOKEN)
    return {"HTTP_X_AUTH_TOKEN": TOKEN}


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/memories", {"text": "a\u0000b"}),
        ("/api/memories", {"text": "ok", "tags": ["lr\u0000"]}),
        ("/api/runs", {"name": "x\u0000", "command": "true"}),
        ("/api/sessions", {"title": "a\u0000"}),
        ("/api/memories", {"text": "ok", "a\u0000": 1}),
    ],
)
def test_nul_in_a_json_body_is_400(client, auth, path, body):
    response = client.post(path, body, content_type="application/json", **auth)
    assert response.status_code == 400
    assert "NUL characters" in response.json()["detail"] and "body" in response.json()["detail"]
    assert not MemoryEntry.objects.exists()


@pytest.mark.parametrize(
    ("path", "where"),
    [
        ("/api/memories/query?project=a%00b", "query string"),
        ("/api/agents?q=a%00b", "query string"),
        ("/api/memories/a%00b", "path"),
        ("/admin/memory_app/memoryentry/?q=a%00", "query string"),
    ],
)
def test_nul_in_the_path_or_query_is_400(client, auth, path, where):
    response = client.get(path, **auth)
    assert response.status_code == 400 and where in response.json()["detail"]


def test_a_literal_backslash_u0000_is_just_text(client, auth):
    response = client.post(
        "/api/memories", {"text": "escape \\u0000 in C"}, content_type="application/json", **auth
    )
    assert response.status_code == 201 and response.json()["text"] == "escape \\u0000 in C"


def test_agents_json_with_nul_is_stored_with_a_replacement_character():
    assert json_safe({"a\x00": ["x\x00y", float("nan")]}) == {"a\ufffd": ["x\ufffdy", "NaN"]}
    key = DjangoMemoryView("executor-1", "executor", {"project": "p"}).write(
        type="metrics", data={"log": "bad\x00byte", "loss": 1.0}
    )
    assert MemoryEntry.objects.get(pk=key).data == {"log": "bad\ufffdbyte", "loss": 1.0}


def test_tags_are_mended_not_allowed_to_lose_the_entry():
    key = DjangoMemoryView("research-1", "orchestrator", {"project": "p"}).write(
        type="reflection", data={"text": "x"}, tags=["lr", " lr ", "a\x00b", "t" * 100, "", 7]
    )
    assert MemoryEntry.objects.get(pk=key).tags == ["lr", "a\ufffdb", "t" * 64, "7"]
