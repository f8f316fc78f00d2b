"""Chat session REST: the happy path, and bad input answered with a 4xx, never a 500."""

import pytest

from sessions_app.models import ChatSession

pytestmark = pytest.mark.django_db


def test_create_list_get(api, settings):
    created = api("post", "/api/sessions", {"title": "  Tune the LR  ", "mode": "wild"})
    assert created.status_code == 201
    body = created.json()
    assert body["title"] == "Tune the LR"
    assert body["mode"] == "wild"
    assert body["model_id"] == settings.AGENTSYS.model_id
    assert body["workdir"] == str(settings.AGENTSYS_WORKDIR)
    assert [s["id"] for s in api("get", "/api/sessions").json()] == [body["id"]]
    assert api("get", f"/api/sessions/{body['id']}").json()["id"] == body["id"]


def test_defaults_and_archived_are_hidden(api):
    session_id = api("post", "/api/sessions", {}).json()["id"]
    assert ChatSession.objects.get(pk=session_id).title == "New chat"
    ChatSession.objects.filter(pk=session_id).update(archived=True)
    assert api("get", "/api/sessions").json() == []
    assert len(api("get", "/api/sessions?include_archived=true").json()) == 1


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        ('{"mode": "chaos"}', 422),
        ('{"title": "' + "x" * 201 + '"}', 422),
        ('{"title": 5}', 422),
        ("{not json", 400),
        ("[]", 422),
        ('{"titel": "typo"}', 422),
    ],
)
def test_bad_bodies_get_a_4xx(api, raw, status):
    response = api("post", "/api/sessions", raw=raw)
    assert response.status_code == status
    assert ChatSession.objects.count() == 0


def test_unknown_session_is_404(api):
    assert api("get", "/api/sessions/chat-nope").status_code == 404


@pytest.mark.parametrize("query", ["limit=0", "limit=100000", "limit=abc", "include_archived=x"])
def test_bad_query_gets_422(api, query):
    assert api("get", f"/api/sessions?{query}").status_code == 422


def test_people_see_their_own_sessions_not_others(client, django_user_model):
    ada = django_user_model.objects.create_user("ada", password="pw-1234567")
    bob = django_user_model.objects.create_user("bob", password="pw-1234567")
    ChatSession.objects.create(title="ada's", owner=ada)
    ChatSession.objects.create(title="shared (made by a script)")
    client.force_login(bob)
    titles = [s["title"] for s in client.get("/api/sessions").json()]
    assert titles == ["shared (made by a script)"]
    own = ChatSession.objects.get(title="ada's")
    assert client.get(f"/api/sessions/{own.pk}").status_code == 404
