"""A database made by main at 175cb1b (before the layers of issue 19) migrates forward, and the
API serves every row it held: agents (a research loop gets its own role and keeps its id),
runs, the event log with its sequence numbers (now events_app's, tables kept), chats, memory,
API tokens, and a person's permission on the event log in the admin."""

import pytest
from channels.db import database_sync_to_async
from django.contrib.auth.models import Permission, User
from django.contrib.contenttypes.models import ContentType
from django.test import Client

from accounts_app.services import digest_of
from events_app.events import record_event
from tests.helpers import migrate, models_at
from tests.integration.test_event_feed import SSEClient

pytestmark = [
    pytest.mark.slow,
    # The event stream follows its group through channels-postgres' own database alias.
    pytest.mark.django_db(transaction=True, databases=["default", "channels_postgres"]),
    pytest.mark.usefixtures(
        "channel_layer_on_test_db", "close_db_connections", "latest_schema_after"
    ),
]

# Every app's last migration at 175cb1b. events_app did not exist yet: going back to agents_app
# 0003 unapplies its 0001, which depends on agents_app 0004.
AT_175CB1B = [
    ("accounts_app", "0001_initial"),
    ("agents_app", "0003_one_word_for_each_end_state"),
    ("memory_app", "0002_memory_query_indexes"),
    ("research_app", "0001_initial"),
    ("scheduler_app", "0007_metrics_out_of_memory"),
    ("sessions_app", "0003_turns_stream_in_runagentd"),
]
TOKEN = "ast_" + "7" * 43
L1, LOOP, EXECUTOR = "orchestrator-11110000", "orchestrator-22220000", "executor-33330000"
SESSION_CLASS = "agentsys.agents.session.SessionAgent"
RESEARCH_CLASS = "agentsys.agents.research.ResearchAgent"
EXECUTOR_CLASS = "agentsys.agents.executor.ExecutorAgent"


def _old_database() -> None:
    """The rows a 175cb1b deployment held, written through that version's models."""
    model = models_at(AT_175CB1B)

    owner = model("auth.User").objects.create(username="ada", is_staff=True)
    model("accounts_app.ApiToken").objects.create(
        user=owner, name="laptop", prefix=TOKEN[:10], digest=digest_of(TOKEN)
    )
    # As 175cb1b's post_migrate left them: the event log's content types under agents_app.
    # (contenttypes and auth are not migrated back: their models today are theirs then.)
    ContentType.objects.filter(app_label="events_app").delete()
    event_type, _ = ContentType.objects.get_or_create(app_label="agents_app", model="event")
    viewing, _ = Permission.objects.get_or_create(
        content_type=event_type, codename="view_event", defaults={"name": "Can view event"}
    )
    owner.user_permissions.add(viewing.pk)
    chat = model("sessions_app.ChatSession").objects.create(
        id="chat-0000aaaa", title="Tune the LR", project="demo"
    )
    turn = model("sessions_app.ChatTurn").objects.create(
        id="turn-0000aaaa", session=chat, status="done", full_text="Starting a loop."
    )
    model("sessions_app.ChatMessage").objects.create(
        session=chat, seq=1, role="user", content="Which LR suits train.py?", turn=turn
    )
    Agent = model("agents_app.Agent")
    Agent.objects.create(
        id=L1, role="orchestrator", cls_path=SESSION_CLASS, project="demo", chat_session=chat
    )
    Agent.objects.create(
        id=LOOP, role="orchestrator", cls_path=RESEARCH_CLASS, project="demo", parent_id=L1
    )
    Agent.objects.create(
        id=EXECUTOR, role="executor", cls_path=EXECUTOR_CLASS, project="demo", parent_id=LOOP
    )
    sweep = model("scheduler_app.Sweep").objects.create(id="sweep-0000aaaa", name="lr sweep")
    model("research_app.ResearchLoop").objects.create(
        agent_id=LOOP, sweep=sweep, chat_session=chat, goal="Find the best LR"
    )
    model("scheduler_app.Run").objects.create(
        id="run-0000aaaa", name="baseline", command="python train.py", agent_id=EXECUTOR
    )
    model("memory_app.MemoryEntry").objects.create(
        key="mem-0000aaaa",
        type="reflection",
        agent_id=LOOP,
        project="demo",
        role="orchestrator",
        data={"text": "A smaller LR learns steadier."},
    )
    model("agents_app.EventStream").objects.create(name="agents", last_seq=2)
    Event = model("agents_app.Event")
    Event.objects.create(id=501, stream="agents", seq=1, kind="started", agent_id=LOOP)
    Event.objects.create(id=502, stream="agents", seq=2, kind="iteration", agent_id=LOOP)


async def _replay(after: int, count: int) -> list[dict]:
    client = SSEClient(f"after={after}", headers=[(b"x-auth-token", TOKEN.encode())])
    status, _ = await client.start()
    assert status == 200
    events = [await client.event() for _ in range(count)]
    await client.close()
    return events


def _migrated_forward() -> None:
    _old_database()
    migrate()
    ContentType.objects.clear_cache()


async def test_a_175cb1b_database_migrates_forward_with_every_row_served():
    await database_sync_to_async(_migrated_forward)()
    # The event stream replays the old events with their numbers.
    replayed = await _replay(0, 2)
    assert [(e["id"], e["kind"], e["agent_id"]) for e in replayed] == [
        (1, "started", LOOP),
        (2, "iteration", LOOP),
    ]
    await database_sync_to_async(_every_row_served)()


def _every_row_served() -> None:
    api = Client(headers={"X-Auth-Token": TOKEN})

    loop = api.get(f"/api/agents/{LOOP}").json()
    assert (loop["id"], loop["role"], loop["children"]) == (LOOP, "research", [EXECUTOR])
    assert [(e["id"], e["kind"]) for e in loop["events"]] == [(1, "started"), (2, "iteration")]
    assert api.get(f"/api/agents/{L1}").json()["role"] == "orchestrator"
    assert api.get(f"/api/agents/{EXECUTOR}").json()["parent_id"] == LOOP

    runs = api.get("/api/runs").json()
    assert [(r["id"], r["agent_id"]) for r in runs] == [("run-0000aaaa", EXECUTOR)]
    chat = api.get("/api/sessions/chat-0000aaaa").json()
    assert chat["title"] == "Tune the LR"
    assert [m["content"] for m in chat["messages"]] == ["Which LR suits train.py?"]
    research = api.get(f"/api/research/{LOOP}").json()
    assert (research["goal"], research["sweep_id"]) == ("Find the best LR", "sweep-0000aaaa")
    memories = api.get("/api/memories").json()
    assert [(m["id"], m["text"]) for m in memories["items"]] == [
        ("mem-0000aaaa", "A smaller LR learns steadier.")
    ]
    entries = api.get(f"/api/agents/{LOOP}/entries").json()
    assert [(e["key"], e["role"]) for e in entries] == [("mem-0000aaaa", "research")]


def test_the_event_log_keeps_its_numbering_and_its_permissions():
    _migrated_forward()

    # The stream goes on from where 175cb1b left it: no seq handed out twice.
    assert record_event(stream="agents", kind="note", publish_live=False).seq == 3
    assert not ContentType.objects.filter(app_label="agents_app", model="event").exists()
    ada = User.objects.get(username="ada")
    assert ada.has_perm("events_app.view_event")
    admin = Client()
    admin.force_login(ada)
    page = admin.get("/admin/events_app/event/")
    assert page.status_code == 200
    assert b"iteration" in page.content
