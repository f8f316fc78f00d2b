"""REST for memories: list, search, add, edit, deactivate, delete, and the entry query."""

from datetime import UTC, datetime, timedelta

import pytest

from memory_app.models import MemoryEntry

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _lab_project(agentsys_config):
    agentsys_config(project="lab")


def reflection(text, minute=0, tags=(), **fields):
    fields.setdefault("project", "lab")
    return MemoryEntry.objects.create(
        type="reflection",
        agent_id="research-1",
        role="orchestrator",
        data={"text": text},
        tags=list(tags),
        created_at=T0 + timedelta(minutes=minute),
        **fields,
    )


def test_add_list_search_edit_deactivate_delete(api):
    reflection("warmup matters for ViTs", 1, ["lr"])
    created = api("post", "/api/memories", {"text": "Node 2 has a flaky GPU", "tags": ["hw"]})
    assert created.status_code == 201
    mine = created.json()
    assert (mine["source"], mine["project"], mine["active"]) == ("person", "lab", True)
    listed = api("get", "/api/memories").json()
    assert listed["count"] == 2
    assert [m["text"] for m in listed["items"]] == [
        "Node 2 has a flaky GPU",
        "warmup matters for ViTs",
    ]
    assert listed["items"][1]["source"] == "agent"
    found = api("get", "/api/memories?q=WARMUP").json()
    assert [m["text"] for m in found["items"]] == ["warmup matters for ViTs"]
    assert api("get", "/api/memories?tag=hw").json()["count"] == 1

    edited = api("patch", f"/api/memories/{mine['id']}", {"text": "Node 2: GPU 3 flaky"}).json()
    assert edited["text"] == "Node 2: GPU 3 flaky" and edited["tags"] == ["hw"]
    api("patch", f"/api/memories/{mine['id']}", {"active": False})
    assert api("get", "/api/memories?active=false").json()["items"][0]["id"] == mine["id"]
    assert api("get", "/api/memories?active=true").json()["count"] == 1

    assert api("delete", f"/api/memories/{mine['id']}").status_code == 204
    assert api("delete", f"/api/memories/{mine['id']}").status_code == 404
    assert api("get", "/api/memories").json()["count"] == 1


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"text": ""},
        {"text": "   "},
        {"text": "x", "oops": 1},
        {"text": "x", "tags": "lr"},
        {"text": "x", "tags": [""]},
        {"text": 5},
        {"text": "x" * 20_001},
    ],
)
def test_bad_memory_bodies_are_422(api, body):
    assert api("post", "/api/memories", body).status_code == 422
    assert not MemoryEntry.objects.exists()


def test_bad_edits(api):
    key = reflection("x").key
    assert api("patch", f"/api/memories/{key}", {}).status_code == 422
    assert api("patch", f"/api/memories/{key}", {"active": "no"}).status_code == 422
    assert api("patch", "/api/memories/000000000000", {"text": "y"}).status_code == 404
    metrics = MemoryEntry.objects.create(type="metrics", project="lab", data={"loss": 1})
    # Only memories (reflections) are a person's to edit; run records are not.
    assert api("patch", f"/api/memories/{metrics.key}", {"text": "y"}).status_code == 404
    assert api("delete", f"/api/memories/{metrics.key}").status_code == 404


def test_query_with_filters(api):
    reflection("a", 1, ["lr"], session="s1")
    reflection("b", 2, ["lr", "reward"], session="s1")
    MemoryEntry.objects.create(
        type="metrics",
        project="lab",
        session="s1",
        tags=["reward"],
        created_at=T0 + timedelta(minutes=3),
    )
    MemoryEntry.objects.create(type="plan", project="other", created_at=T0)
    rows = api("get", "/api/memories/query?project=lab&tags=lr,reward").json()
    assert [r["type"] for r in rows] == ["metrics", "reflection", "reflection"]
    rows = api("get", "/api/memories/query?session=s1&type=reflection&order=oldest&limit=1").json()
    assert [r["data"] for r in rows] == [{"text": "a"}]
    since = (T0 + timedelta(minutes=2)).isoformat().replace("+00:00", "Z")
    rows = api("get", f"/api/memories/query?since={since}&type_not=plan").json()
    assert [r["type"] for r in rows] == ["metrics", "reflection"]


@pytest.mark.parametrize(
    ("query", "fragment"),
    [
        ("type=nope", "unknown entry type"),
        ("type_not=Plan", "unknown entry type"),
        ("order=sideways", "order must be"),
    ],
)
def test_bad_queries_are_400(api, query, fragment):
    response = api("get", f"/api/memories/query?{query}")
    assert response.status_code == 400 and fragment in response.json()["detail"]


@pytest.mark.parametrize("query", ["limit=0", "limit=100000", "since=yesterday", "limit=x"])
def test_malformed_query_parameters_are_422(api, query):
    assert api("get", f"/api/memories/query?{query}").status_code == 422
