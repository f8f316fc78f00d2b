"""Agents REST: list, tree, detail, entries and the commands (steer, pause, resume, stop);
bad input is answered with a 4xx, never a 500."""

from datetime import timedelta

import pytest
from django.utils import timezone

from agents_app.models import Agent, AgentCommand
from agentsys.types import AgentStatus, EntryType
from events_app.events import record_event
from hosts_app.models import Host
from memory_app.models import MemoryEntry
from sessions_app.models import ChatSession

pytestmark = pytest.mark.django_db


def make_agent(agent_id, *, minutes_ago=0, **fields):
    fields.setdefault("role", "orchestrator")
    fields.setdefault("cls_path", "agentsys.agents.research")
    fields.setdefault("project", "demo")
    agent = Agent.objects.create(id=agent_id, **fields)
    # created_at is auto_now_add: set it afterwards to get a known order.
    Agent.objects.filter(pk=agent_id).update(
        created_at=timezone.now() - timedelta(minutes=minutes_ago)
    )
    agent.refresh_from_db()
    return agent


@pytest.fixture
def tree():
    """l1 (running, in a chat) → l2 (running) → l3a (done), l3b (idle executor);
    other (idle, a root of its own, newest)."""
    chat = ChatSession.objects.create(title="Tune the LR", project="demo")
    host = Host.objects.create(name="gpu-box", hostname="gpu-box")
    l1 = make_agent(
        "orchestrator-l1",
        minutes_ago=40,
        status=AgentStatus.RUNNING,
        chat_session=chat,
        host=host,
        goal="Answer the user",
    )
    l2 = make_agent(
        "orchestrator-l2",
        minutes_ago=30,
        status=AgentStatus.RUNNING,
        parent=l1,
        goal="Find the best learning rate for ResNet",
    )
    l3a = make_agent(
        "executor-l3a",
        minutes_ago=20,
        role="executor",
        status=AgentStatus.DONE,
        parent=l2,
        goal="python train.py --lr 0.1",
    )
    l3b = make_agent(
        "executor-l3b",
        minutes_ago=10,
        role="executor",
        parent=l2,
        goal="python train.py --lr 0.01",
    )
    other = make_agent("orchestrator-other", minutes_ago=5, goal="Summarise last week")
    return {"chat": chat, "host": host, "l1": l1, "l2": l2, "l3a": l3a, "l3b": l3b, "other": other}


def ids(response):
    assert response.status_code == 200, response.content
    return [agent["id"] for agent in response.json()]


# -- list -------------------------------------------------------------------------------------


def test_list_newest_first_with_every_field(api, tree):
    response = api("get", "/api/agents")
    assert ids(response) == [
        "orchestrator-other",
        "executor-l3b",
        "executor-l3a",
        "orchestrator-l2",
        "orchestrator-l1",
    ]
    l1 = response.json()[-1]
    assert l1["host"] == "gpu-box"
    assert l1["chat_session_id"] == tree["chat"].id
    assert l1["status"] == "running"
    assert l1["parent_id"] is None
    assert response.json()[-2]["parent_id"] == "orchestrator-l1"


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("status=running", ["orchestrator-l2", "orchestrator-l1"]),
        ("status=idle,done", ["orchestrator-other", "executor-l3b", "executor-l3a"]),
        ("role=executor", ["executor-l3b", "executor-l3a"]),
        ("role=executor&status=done", ["executor-l3a"]),
        ("parent_id=orchestrator-l2", ["executor-l3b", "executor-l3a"]),
        ("parent_id=nobody", []),
        ("q=LEARNING rate", ["orchestrator-l2"]),
        ("q=train.py", ["executor-l3b", "executor-l3a"]),
        (
            "status=&role=",
            [
                "orchestrator-other",
                "executor-l3b",
                "executor-l3a",
                "orchestrator-l2",
                "orchestrator-l1",
            ],
        ),
        ("limit=2", ["orchestrator-other", "executor-l3b"]),
        ("limit=2&offset=2", ["executor-l3a", "orchestrator-l2"]),
        ("offset=10", []),
    ],
)
def test_list_filters_and_pages(api, tree, query, expected):
    assert ids(api("get", f"/api/agents?{query}")) == expected


def test_list_by_chat_session(api, tree):
    assert ids(api("get", f"/api/agents?chat_session_id={tree['chat'].id}")) == ["orchestrator-l1"]


@pytest.mark.parametrize(
    ("query", "complaint"),
    [
        ("status=sleeping", "status must be one of idle, running, paused, done, failed, stopped"),
        ("status=running,zombie", "got 'zombie'"),
        ("role=manager", "role must be one of orchestrator, research, executor, sidecar"),
    ],
)
def test_list_unknown_status_or_role_is_400(api, tree, query, complaint):
    response = api("get", f"/api/agents?{query}")
    assert response.status_code == 400
    assert complaint in response.json()["detail"]


@pytest.mark.parametrize(
    "query", ["limit=0", "limit=501", "limit=abc", "offset=-1", "offset=99999999999999999999"]
)
def test_list_bad_paging_is_422(api, query):
    assert api("get", f"/api/agents?{query}").status_code == 422


def test_list_needs_auth(client):
    assert client.get("/api/agents").status_code == 401


# -- tree -------------------------------------------------------------------------------------


def node_ids(node):
    return {node["id"]: [node_ids(child) for child in node["children"]]}


def test_tree_nests_every_agent_under_its_root(api, tree, django_assert_num_queries):
    with django_assert_num_queries(1):
        response = api("get", "/api/agents/tree")
    assert response.status_code == 200
    assert [node_ids(root) for root in response.json()] == [
        {"orchestrator-other": []},
        {
            "orchestrator-l1": [
                {"orchestrator-l2": [{"executor-l3a": []}, {"executor-l3b": []}]},
            ]
        },
    ]
    l3a = response.json()[1]["children"][0]["children"][0]
    assert (l3a["status"], l3a["role"], l3a["goal"]) == (
        "done",
        "executor",
        "python train.py --lr 0.1",
    )


def test_tree_from_one_root(api, tree):
    response = api("get", "/api/agents/tree?root_id=orchestrator-l2")
    assert [node_ids(root) for root in response.json()] == [
        {"orchestrator-l2": [{"executor-l3a": []}, {"executor-l3b": []}]}
    ]
    assert api("get", "/api/agents/tree?root_id=nobody").status_code == 404


def test_tree_survives_a_parent_cycle_made_by_hand(api, tree):
    Agent.objects.filter(pk="orchestrator-l1").update(parent_id="executor-l3b")
    assert api("get", "/api/agents/tree").status_code == 200  # the cycle has no root
    response = api("get", "/api/agents/tree?root_id=orchestrator-l1")
    assert response.status_code == 200
    assert len(str(response.json())) < 2000  # each agent placed once


def test_tree_of_nothing(api):
    assert api("get", "/api/agents/tree").json() == []


# -- detail -----------------------------------------------------------------------------------


def test_detail_has_children_successor_and_last_50_events(api, tree):
    Agent.objects.filter(pk="orchestrator-l2").update(superseded_by_id="orchestrator-other")
    for n in range(55):
        record_event(
            stream="agents", kind="iteration", agent_id="orchestrator-l2", payload={"n": n}
        )
    record_event(stream="agents", kind="started", agent_id="orchestrator-l1")
    body = api("get", "/api/agents/orchestrator-l2").json()
    assert body["id"] == "orchestrator-l2"
    assert body["children"] == ["executor-l3a", "executor-l3b"]
    assert body["superseded_by_id"] == "orchestrator-other"
    assert body["goal"] == "Find the best learning rate for ResNet"
    assert len(body["events"]) == 50
    assert [e["payload"]["n"] for e in body["events"]] == list(range(5, 55))  # oldest first
    assert body["events"][-1]["id"] == 55  # the seq, as the live stream sends it
    assert body["events"][-1]["stream"] == "agents"


def test_detail_of_unknown_agent_is_404_json(api):
    response = api("get", "/api/agents/orchestrator-nope")
    assert response.status_code == 404
    assert response.json() == {"detail": "No agent 'orchestrator-nope'"}


@pytest.mark.parametrize("agent_id", ["x" * 300, "%20", "a%2Fb", "ünïcödé"])
def test_odd_agent_ids_are_404_not_500(api, agent_id):
    assert api("get", f"/api/agents/{agent_id}").status_code == 404


# -- entries ----------------------------------------------------------------------------------


@pytest.fixture
def entries(tree):
    def entry(minutes_ago, **fields):
        return MemoryEntry.objects.create(
            project="demo", created_at=timezone.now() - timedelta(minutes=minutes_ago), **fields
        )

    return {
        "plan": entry(30, type=EntryType.PLAN, agent_id="orchestrator-l2"),
        "metrics": entry(20, type=EntryType.METRICS, agent_id="orchestrator-l2"),
        "reflection": entry(10, type=EntryType.REFLECTION, agent_id="orchestrator-l2"),
        "someone_else": entry(5, type=EntryType.PLAN, agent_id="orchestrator-l1"),
        "to_l2": entry(1, type=EntryType.MESSAGE, agent_id="user", target_id="orchestrator-l2"),
    }


def keys(response):
    assert response.status_code == 200, response.content
    return [entry["key"] for entry in response.json()]


def test_entries_of_an_agent_newest_first(api, entries):
    assert keys(api("get", "/api/agents/orchestrator-l2/entries")) == [
        entries["reflection"].key,
        entries["metrics"].key,
        entries["plan"].key,
    ]
    assert keys(api("get", "/api/agents/orchestrator-l2/entries?limit=1")) == [
        entries["reflection"].key
    ]
    assert keys(api("get", "/api/agents/orchestrator-l2/entries?type=plan,metrics")) == [
        entries["metrics"].key,
        entries["plan"].key,
    ]
    assert keys(api("get", "/api/agents/orchestrator-l2/entries?inbox=true")) == [
        entries["to_l2"].key
    ]


def test_entries_bad_type_is_400_unknown_agent_404(api, entries):
    response = api("get", "/api/agents/orchestrator-l2/entries?type=diary")
    assert response.status_code == 400
    assert "type must be one of plan, context, metrics" in response.json()["detail"]
    assert api("get", "/api/agents/nobody/entries").status_code == 404
    assert api("get", "/api/agents/orchestrator-l2/entries?limit=0").status_code == 422


# -- steer ------------------------------------------------------------------------------------


@pytest.mark.parametrize("urgency", ["critical", "priority"])
def test_steer_critical_and_priority_queue_a_command(api, tree, urgency):
    response = api(
        "post",
        "/api/agents/orchestrator-l2/steer",
        {"context": "  Try a cosine schedule  ", "urgency": urgency},
    )
    assert response.status_code == 202
    body = response.json()
    command = AgentCommand.objects.get()
    assert body == {
        "agent_id": "orchestrator-l2",
        "urgency": urgency,
        "status": "queued",
        "command_id": command.pk,
        "entry_key": None,
    }
    assert command.kind == "steer"
    assert command.payload == {"context": "Try a cosine schedule", "urgency": urgency}
    assert command.requested_by is None  # the API token stands for no particular user


def test_steer_urgency_defaults_to_priority(api, tree):
    response = api("post", "/api/agents/orchestrator-l2/steer", {"context": "Go faster"})
    assert response.status_code == 202
    assert response.json()["urgency"] == "priority"


def test_message_steer_lands_in_the_agents_inbox(api, tree):
    response = api(
        "post",
        "/api/agents/orchestrator-l2/steer",
        {"context": "FYI the cluster is busy tonight", "urgency": "message"},
    )
    assert response.status_code == 202
    body = response.json()
    entry = MemoryEntry.objects.get()
    assert body["status"] == "delivered_to_inbox"
    assert body["entry_key"] == entry.key
    assert body["command_id"] is None
    assert entry.type == EntryType.MESSAGE
    assert entry.target_id == "orchestrator-l2"
    assert entry.data == {"context": "FYI the cluster is busy tonight"}
    assert entry.project == "demo"
    assert not AgentCommand.objects.exists()  # no daemon involved
    inbox = api("get", "/api/agents/orchestrator-l2/entries?inbox=true")
    assert keys(inbox) == [entry.key]


def test_steer_by_a_logged_in_user_records_who(client, django_user_model, tree):
    ada = django_user_model.objects.create_user("ada", password="pw-1234567")
    client.force_login(ada)  # the test client skips CSRF checks; test_auth covers them
    client.post(
        "/api/agents/orchestrator-l2/steer",
        {"context": "note", "urgency": "message"},
        content_type="application/json",
    )
    assert MemoryEntry.objects.get().agent_id == "user:ada"
    client.post("/api/agents/orchestrator-l2/pause")
    assert AgentCommand.objects.get().requested_by == ada


@pytest.mark.parametrize(
    "raw",
    [
        '{"urgency": "priority"}',  # no context
        '{"context": "", "urgency": "priority"}',
        '{"context": "   \\n\\t ", "urgency": "priority"}',
        '{"context": "' + "x" * 20_001 + '", "urgency": "priority"}',
        '{"context": "hi", "urgency": "asap"}',
        '{"context": "hi", "urgency": "PRIORITY"}',
        '{"context": 5, "urgency": "priority"}',
        '{"context": ["hi"], "urgency": "priority"}',
        '{"context": "hi", "urgency": "priority", "agent": "x"}',  # unknown field
        "[]",
        '"hi"',
    ],
)
def test_steer_bad_body_is_422(api, tree, raw):
    response = api("post", "/api/agents/orchestrator-l2/steer", raw=raw)
    assert response.status_code == 422, response.content
    assert not AgentCommand.objects.exists()
    assert not MemoryEntry.objects.exists()


def test_steer_context_limit_counts_after_stripping(api, tree):
    context = "  " + "x" * 20_000 + "  "
    response = api("post", "/api/agents/orchestrator-l2/steer", {"context": context})
    assert response.status_code == 202
    assert AgentCommand.objects.get().payload["context"] == "x" * 20_000


def test_steer_not_json_is_400(api, tree):
    assert api("post", "/api/agents/orchestrator-l2/steer", raw="{nope").status_code == 400


@pytest.mark.parametrize("urgency", ["critical", "priority", "message"])
def test_steer_unknown_agent_404_finished_agent_409(api, tree, urgency):
    body = {"context": "hi", "urgency": urgency}
    unknown = api("post", "/api/agents/nobody/steer", body)
    assert unknown.status_code == 404
    assert unknown.json() == {"detail": "No agent 'nobody'"}
    finished = api("post", "/api/agents/executor-l3a/steer", body)
    assert finished.status_code == 409
    assert finished.json() == {"detail": "executor-l3a is done; it no longer takes commands"}
    assert not AgentCommand.objects.exists()
    assert not MemoryEntry.objects.exists()


# -- pause, resume, stop ----------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["pause", "stop"])
def test_pause_and_stop_queue_a_command(api, tree, kind):
    response = api("post", f"/api/agents/orchestrator-l2/{kind}")
    assert response.status_code == 202
    command = AgentCommand.objects.get()
    assert response.json() == {
        "command_id": command.pk,
        "agent_id": "orchestrator-l2",
        "kind": kind,
        "status": "queued",
    }
    assert (command.agent_id, command.kind, command.status) == ("orchestrator-l2", kind, "pending")


def test_resume_a_paused_agent(api, tree):
    Agent.objects.filter(pk="orchestrator-l2").update(status=AgentStatus.PAUSED)
    response = api("post", "/api/agents/orchestrator-l2/resume")
    assert response.status_code == 202
    assert response.json()["kind"] == "resume"


@pytest.mark.parametrize(
    ("agent_id", "kind", "reason"),
    [
        ("executor-l3a", "stop", "executor-l3a is done; it no longer takes commands"),
        ("executor-l3a", "pause", "executor-l3a is done; it no longer takes commands"),
        ("orchestrator-l2", "resume", "orchestrator-l2 is running, not paused"),
    ],
)
def test_commands_that_cannot_apply_are_409(api, tree, agent_id, kind, reason):
    response = api("post", f"/api/agents/{agent_id}/{kind}")
    assert response.status_code == 409
    assert response.json() == {"detail": reason}
    assert not AgentCommand.objects.exists()


def test_pause_twice_is_409(api, tree):
    Agent.objects.filter(pk="orchestrator-l2").update(status=AgentStatus.PAUSED)
    response = api("post", "/api/agents/orchestrator-l2/pause")
    assert response.status_code == 409
    assert "already paused" in response.json()["detail"]


@pytest.mark.parametrize("kind", ["pause", "resume", "stop"])
def test_commands_to_unknown_agent_are_404(api, kind):
    assert api("post", f"/api/agents/nobody/{kind}").status_code == 404


@pytest.mark.parametrize("kind", ["steer", "pause", "resume", "stop"])
def test_command_routes_take_only_post(api, client, tree, kind):
    assert api("get", f"/api/agents/orchestrator-l2/{kind}").status_code == 405
    assert api("delete", f"/api/agents/orchestrator-l2/{kind}").status_code == 405
    client.cookies.clear()
    assert client.post(f"/api/agents/orchestrator-l2/{kind}").status_code == 401
    assert not AgentCommand.objects.exists()


def test_a_stray_body_on_a_command_does_no_harm(api, tree):
    # pause/resume/stop take no body; a stray one does no harm.
    response = api("post", "/api/agents/orchestrator-l2/stop", {"why": "done"})
    assert response.status_code == 202


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"cls_path": "os.system", "goal": "pwn"}, "not an allowed agent class"),
        ({"cls_path": "subprocess.Popen", "goal": "pwn"}, "not an allowed agent class"),
    ],
)
def test_start_refuses_classes_off_the_allow_list(api, body, fragment):
    response = api("post", "/api/agents", body)
    assert response.status_code == 422
    assert fragment in response.json()["detail"]
    assert not Agent.objects.exists()


@pytest.mark.parametrize(
    "body",
    [
        {"goal": "no class"},
        {"cls_path": "tests.runtime_agents.TestResearch"},
        {"cls_path": "tests.runtime_agents.TestResearch", "goal": "x", "extra": 1},
        {"cls_path": "tests.runtime_agents.TestResearch", "goal": "x", "config": []},
    ],
)
def test_start_with_a_bad_body_is_422(api, body):
    assert api("post", "/api/agents", body).status_code == 422


def test_start_an_allow_listed_agent(api, agentsys_config):
    from tests.runtime_agents import ALL

    agentsys_config(extra_agent_classes=frozenset(ALL.split(",")))
    response = api(
        "post",
        "/api/agents",
        {
            "cls_path": "tests.runtime_agents.TestResearch",
            "goal": "find a better LR",
            "project": "demo",
        },
    )
    assert response.status_code == 201
    body = response.json()
    assert (body["status"], body["role"], body["host"]) == ("idle", "orchestrator", None)
    assert body["id"].startswith("orchestrator-")
