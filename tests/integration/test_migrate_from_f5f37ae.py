"""A database made by main at f5f37ae (before issue 36's second structure step: the project
package was config/ then, and a sweep had no `created_by_agent`) migrates forward, and the API
serves every row it held: a person and their token, a host, a chat with its turn, the three
levels of agents, a research loop with its sweep, a run in it with its metric series, an alert,
memory and the event log."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.contenttypes.models import ContentType
from django.test import Client
from django.utils import timezone

from accounts_app.services import digest_of
from tests.helpers import migrate, models_at

pytestmark = [
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("latest_schema_after"),
]

# Every app's last migration at f5f37ae.
AT_F5F37AE = [
    ("accounts_app", "0002_apitoken_agent_id"),
    ("agents_app", "0006_host_from_hosts_app"),
    ("events_app", "0001_initial"),
    ("hosts_app", "0002_host_labels"),
    ("memory_app", "0002_memory_query_indexes"),
    ("research_app", "0002_research_sweeps_kind"),
    ("scheduler_app", "0017_run_code"),
    ("sessions_app", "0004_host_from_hosts_app"),
]
TOKEN = "ast_" + "5" * 43
L1, LOOP, EXECUTOR = "orchestrator-aaaa0000", "research-bbbb0000", "executor-cccc0000"
CHAT, SWEEP, RUN = "chat-dddd0000", "sweep-eeee0000", "run-ffff0000"


def _old_database() -> None:
    """The rows an f5f37ae deployment held, written through that version's models."""
    model = models_at(AT_F5F37AE)

    ada = model("auth.User").objects.create(username="ada", is_staff=True)
    model("accounts_app.ApiToken").objects.create(
        user=ada, name="laptop", prefix=TOKEN[:10], digest=digest_of(TOKEN)
    )
    host = model("hosts_app.Host").objects.create(name="gpu-a", labels={"site": "lab"})
    chat = model("sessions_app.ChatSession").objects.create(id=CHAT, title="Tune the LR")
    turn = model("sessions_app.ChatTurn").objects.create(
        id="turn-dddd0000", session=chat, status="done", full_text="Starting a loop."
    )
    model("sessions_app.ChatMessage").objects.create(
        session=chat, seq=1, role="user", content="Which LR suits train.py?", turn=turn
    )
    Agent = model("agents_app.Agent")
    common = {"project": "demo", "host": host}
    Agent.objects.create(
        id=L1,
        role="orchestrator",
        cls_path="agentsys.agents.session.SessionAgent",
        chat_session=chat,
        **common,
    )
    Agent.objects.create(
        id=LOOP,
        role="research",
        cls_path="agentsys.agents.research.ResearchAgent",
        parent_id=L1,
        status="done",
        **common,
    )
    Agent.objects.create(
        id=EXECUTOR,
        role="executor",
        cls_path="agentsys.agents.executor.ExecutorAgent",
        parent_id=LOOP,
        status="done",
        **common,
    )
    sweep = model("scheduler_app.Sweep").objects.create(
        id=SWEEP, name="lr sweep", created_by=ada, chat_session=chat
    )
    model("research_app.ResearchLoop").objects.create(
        agent_id=LOOP, sweep=sweep, chat_session=chat, goal="Find the best LR"
    )
    run = model("scheduler_app.Run").objects.create(
        id=RUN,
        name="lr=0.1",
        command="python train.py --lr=0.1",
        agent_id=EXECUTOR,
        sweep=sweep,
        status="done",
        exit_code=0,
        params={"lr": 0.1},
    )
    series = model("scheduler_app.MetricSeries").objects.create(run=run, key="loss")
    model("scheduler_app.MetricPoint").objects.bulk_create(
        [
            model("scheduler_app.MetricPoint")(
                series=series, step=s, value=1.0 / (s + 1), time=timezone.now()
            )
            for s in range(3)
        ]
    )
    model("scheduler_app.Alert").objects.create(
        agent_id=EXECUTOR, severity="warning", message="loss spiked", signature="loss_spike"
    )
    model("memory_app.MemoryEntry").objects.create(
        key="mem-gggg0000",
        type="reflection",
        agent_id=LOOP,
        project="demo",
        role="research",
        data={"text": "A smaller LR learns steadier."},
    )
    model("events_app.EventStream").objects.create(name="agents", last_seq=1)
    model("events_app.Event").objects.create(
        id=901, stream="agents", seq=1, kind="started", agent_id=LOOP
    )


def test_an_f5f37ae_database_migrates_forward_with_every_row_served():
    _old_database()
    migrate()
    ContentType.objects.clear_cache()
    api = Client(headers={"X-Auth-Token": TOKEN})

    loop = api.get(f"/api/agents/{LOOP}").json()
    assert (loop["role"], loop["children"], loop["parent_id"]) == ("research", [EXECUTOR], L1)
    assert [(e["id"], e["kind"]) for e in loop["events"]] == [(1, "started")]
    research = api.get(f"/api/research/{LOOP}").json()
    assert (research["goal"], research["sweep_id"]) == ("Find the best LR", SWEEP)

    sweep = api.get(f"/api/sweeps/{SWEEP}").json()
    assert sweep["name"] == "lr sweep"
    runs = api.get("/api/runs").json()
    assert [(r["id"], r["status"], r["exit_code"]) for r in runs] == [(RUN, "done", 0)]
    metrics = api.get(f"/api/runs/{RUN}/metrics").json()
    assert metrics, metrics
    assert "loss" in str(metrics)

    chat = api.get(f"/api/sessions/{CHAT}").json()
    assert chat["title"] == "Tune the LR"
    assert [m["content"] for m in chat["messages"]] == ["Which LR suits train.py?"]
    memories = api.get("/api/memories").json()
    assert [(m["id"], m["text"]) for m in memories["items"]] == [
        ("mem-gggg0000", "A smaller LR learns steadier.")
    ]
    alerts = api.get("/api/alerts").json()
    assert [a["message"] for a in alerts] == ["loss spiked"]
    hosts = api.get("/api/hosts").json()
    assert [(h["name"], h["labels"]) for h in hosts] == [("gpu-a", {"site": "lab"})]

    # The pages that list them render too.
    person = Client()
    person.force_login(get_user_model().objects.get(username="ada"))
    for page in ("/runs/", f"/runs/{RUN}/", f"/sweeps/{SWEEP}/", f"/research/{LOOP}/", "/chat/"):
        assert person.get(page).status_code == 200, page
