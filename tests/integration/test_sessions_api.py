"""Chat session REST: the happy path, and bad input answered with a 4xx, never a 500."""

from datetime import timedelta

import pytest
from django.utils import timezone

from agents_app.models import AgentCommand
from events_app.events import chat_stream
from events_app.models import EventStream
from scheduler_app.models import Alert
from sessions_app.models import ChatMessage, ChatSession, ChatTurn

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


# --- status, detail, rename, archive, model, system prompt ------------------------------


def _session(title="s", **fields):
    return ChatSession.objects.create(title=title, **fields)


def _agent(session, status, *, parent=None, minutes_ago=0, **fields):
    from agents_app.models import Agent
    from agentsys.types import new_agent_id

    finished = status in {"done", "failed", "stopped", "cancelled", "rejected", "lost"}
    cls_path = fields.pop("cls_path", "agentsys.agents.research.ResearchAgent")
    role = "orchestrator" if cls_path.endswith("SessionAgent") else "research"
    return Agent.objects.create(
        id=new_agent_id(role),
        role=role,
        cls_path=cls_path,
        project="demo",
        chat_session=session,
        status=status,
        parent=parent,
        finished_at=timezone.now() - timedelta(minutes=minutes_ago) if finished else None,
        **fields,
    )


def _turn(session, status, *, minutes_ago=0):
    turn = ChatTurn.objects.create(session=session, status=status)
    started = timezone.now() - timedelta(minutes=minutes_ago)
    ChatTurn.objects.filter(pk=turn.pk).update(started_at=started)
    return turn


def _status_of(api, session):
    listed = {s["id"]: s["status"] for s in api("get", "/api/sessions").json()}
    detail = api("get", f"/api/sessions/{session.pk}").json()["status"]
    assert listed[session.pk] == detail
    return detail


def test_a_new_session_is_idle_and_a_chat_that_ended_well_stays_idle(api):
    session = _session()
    assert _status_of(api, session) == "idle"
    _turn(session, "done")
    assert _status_of(api, session) == "idle"


@pytest.mark.parametrize("status", ["running", "queued"])
def test_a_live_turn_is_running(api, status):
    session = _session()
    _turn(session, "failed", minutes_ago=5)
    _turn(session, status)
    assert _status_of(api, session) == "running"


@pytest.mark.parametrize("status", ["idle", "running", "paused"])
def test_a_live_agent_is_running(api, status):
    session = _session()
    _agent(session, "failed", minutes_ago=5)
    _agent(session, status)
    assert _status_of(api, session) == "running"


def test_the_chats_own_session_agent_does_not_make_it_running(api):
    from agentsys.registry import SESSION_AGENT

    session = _session()
    _turn(session, "done")
    _agent(session, "running", cls_path=SESSION_AGENT)  # lives as long as the chat
    assert _status_of(api, session) == "idle"
    _agent(session, "done", minutes_ago=1)
    assert _status_of(api, session) == "done"


def test_an_alert_asking_for_an_answer_is_awaiting_human(api):
    session = _session()
    agent = _agent(session, "running")
    Alert.objects.create(agent_id=agent.id, message="NaN loss", choices=[])  # no question
    assert _status_of(api, session) == "running"
    alert = Alert.objects.create(agent_id=agent.id, message="Go on?", choices=["yes", "no"])
    assert _status_of(api, session) == "awaiting_human"
    Alert.objects.filter(pk=alert.pk).update(status="resolved", response="yes")
    assert _status_of(api, session) == "running"
    other = _session("other")  # an alert of another session's agent is not this one's
    Alert.objects.create(agent_id=_agent(other, "running").id, message="?", choices=["ok"])
    assert _status_of(api, session) == "running"
    assert _status_of(api, other) == "awaiting_human"


@pytest.mark.parametrize(
    ("turns", "agents", "expected"),
    [
        (["failed"], [], "failed"),
        (["done"], ["failed"], "failed"),
        ([], ["rejected"], "failed"),
        (["stopped"], [], "questionable"),
        (["interrupted"], [], "questionable"),
        ([], ["stopped"], "questionable"),
        ([], ["lost"], "questionable"),
        (["done"], ["done"], "done"),
        ([], ["failed", "done"], "done"),  # the newest finished agent counts
        (["failed", "done"], [], "idle"),  # and the newest turn
    ],
)
def test_the_latest_outcome_decides(api, turns, agents, expected):
    session = _session()
    for age, status in enumerate(reversed(turns)):
        _turn(session, status, minutes_ago=age)
    for age, status in enumerate(reversed(agents)):
        _agent(session, status, minutes_ago=age)
    assert _status_of(api, session) == expected


def test_the_list_reads_every_status_in_a_fixed_number_of_queries(
    api, django_assert_max_num_queries
):
    for n in range(8):
        session = _session(f"s{n}")
        _turn(session, "failed")
        _agent(session, "done")
    with django_assert_max_num_queries(6):
        assert len(api("get", "/api/sessions").json()) == 8


def test_search_by_title(api):
    _session("Tune the LR")
    _session("Bigger batch")
    assert [s["title"] for s in api("get", "/api/sessions?q=tune").json()] == ["Tune the LR"]
    assert api("get", "/api/sessions?q=" + "x" * 201).status_code == 422


def test_create_with_a_model_and_a_system_prompt(api, settings):
    body = {"model_provider": "openai", "model_id": "gpt-5", "system_prompt": "Be brief."}
    created = api("post", "/api/sessions", body)
    assert created.status_code == 201, created.content
    session = ChatSession.objects.get(pk=created.json()["id"])
    assert (session.model_provider, session.model_id) == ("openai", "gpt-5")
    assert session.system_prompt == "Be brief."
    assert created.json()["status"] == "idle"
    default = ChatSession.objects.get(pk=api("post", "/api/sessions", {}).json()["id"])
    assert default.model_provider == settings.AGENTSYS.model_provider


def test_detail_has_the_newest_messages_in_order_and_the_live_stream(api):
    session = _session()
    turn = _turn(session, "running")
    for seq in range(1, 6):
        ChatMessage.objects.create(
            session=session, seq=seq, role="user", content=f"m{seq}", turn=turn
        )
    EventStream.objects.create(name=chat_stream(session.pk), last_seq=42)
    body = api("get", f"/api/sessions/{session.pk}?messages_limit=3").json()
    assert [m["seq"] for m in body["messages"]] == [3, 4, 5]
    assert body["messages"][0]["turn_id"] == turn.pk
    assert body["active_stream"] == {"turn_id": turn.pk, "status": "running", "last_seq": 42}
    assert len(api("get", f"/api/sessions/{session.pk}").json()["messages"]) == 5
    ChatTurn.objects.filter(pk=turn.pk).update(status="done")
    assert api("get", f"/api/sessions/{session.pk}").json()["active_stream"] is None


@pytest.mark.parametrize("limit", ["0", "2001", "x"])
def test_bad_messages_limit_is_422(api, limit):
    session = _session()
    assert api("get", f"/api/sessions/{session.pk}?messages_limit={limit}").status_code == 422


def test_rename(api):
    session = _session("old")
    renamed = api("patch", f"/api/sessions/{session.pk}", {"title": "  new  "})
    assert renamed.status_code == 200, renamed.content
    assert renamed.json()["title"] == "new"
    assert ChatSession.objects.get(pk=session.pk).title == "new"


@pytest.mark.parametrize(
    "body", [{"title": "   "}, {"title": "x" * 201}, {}, {"title": "a", "x": 1}]
)
def test_a_bad_title_is_422_and_changes_nothing(api, body):
    session = _session("old")
    response = api("patch", f"/api/sessions/{session.pk}", body)
    assert response.status_code == 422
    assert "title" in response.json()["detail"] or "x" in response.json()["detail"]
    assert ChatSession.objects.get(pk=session.pk).title == "old"


def test_delete_archives_stops_the_top_live_agents_and_the_live_turn(api):
    session = _session()
    top = _agent(session, "running")
    child = _agent(session, "running", parent=top)  # stopped by the cascade, not directly
    paused = _agent(session, "paused")
    _agent(session, "done")
    turn = _turn(session, "running")
    response = api("delete", f"/api/sessions/{session.pk}")
    assert response.status_code == 204
    assert ChatSession.objects.get(pk=session.pk).archived
    stopped = set(AgentCommand.objects.filter(kind="stop").values_list("agent_id", flat=True))
    assert stopped == {top.pk, paused.pk}
    assert child.pk not in stopped
    turn.refresh_from_db()
    assert turn.status == "stopped" and turn.finished_at is not None
    assert api("get", "/api/sessions").json() == []
    assert api("get", f"/api/sessions/{session.pk}").json()["archived"] is True


def test_delete_with_nothing_live_and_twice(api):
    session = _session()
    _agent(session, "failed")
    assert api("delete", f"/api/sessions/{session.pk}").status_code == 204
    assert api("delete", f"/api/sessions/{session.pk}").status_code == 204
    assert not AgentCommand.objects.exists()


def test_model_and_system_prompt(api):
    session = _session(model_provider="demo", model_id="demo-research")
    url = f"/api/sessions/{session.pk}"
    assert api("get", f"{url}/model").json() == {
        "model_provider": "demo",
        "model_id": "demo-research",
    }
    body = {"model_provider": "anthropic", "model_id": "claude-x"}
    assert api("put", f"{url}/model", body).json() == body
    assert api("get", f"{url}/model").json() == body
    assert api("get", f"{url}/system-prompt").json() == {"system_prompt": ""}
    put = api("put", f"{url}/system-prompt", {"system_prompt": "Be brief."})
    assert put.json() == {"system_prompt": "Be brief."}
    assert ChatSession.objects.get(pk=session.pk).system_prompt == "Be brief."


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("model", {"model_provider": "", "model_id": "x"}),
        ("model", {"model_provider": "p", "model_id": "  "}),
        ("model", {"model_provider": "p" * 101, "model_id": "x"}),
        ("model", {"model_provider": "p", "model_id": "x" * 201}),
        ("model", {"model_provider": "p"}),
        ("system-prompt", {"system_prompt": "x" * 100_001}),
        ("system-prompt", {"system_prompt": 5}),
        ("system-prompt", {"prompt": "typo"}),
    ],
)
def test_bad_model_or_prompt_is_422(api, path, body):
    session = _session(model_provider="demo", model_id="m", system_prompt="keep")
    assert api("put", f"/api/sessions/{session.pk}/{path}", body).status_code == 422
    session.refresh_from_db()
    assert (session.model_provider, session.model_id, session.system_prompt) == (
        "demo",
        "m",
        "keep",
    )


@pytest.mark.parametrize(
    ("method", "suffix", "body"),
    [
        ("get", "", None),
        ("patch", "", {"title": "t"}),
        ("delete", "", None),
        ("get", "/model", None),
        ("put", "/model", {"model_provider": "p", "model_id": "m"}),
        ("get", "/system-prompt", None),
        ("put", "/system-prompt", {"system_prompt": "s"}),
    ],
)
def test_every_route_is_404_for_an_unknown_or_someone_elses_session(
    api, client, django_user_model, method, suffix, body
):
    assert api(method, f"/api/sessions/chat-nope{suffix}", body).status_code == 404
    ada = django_user_model.objects.create_user("ada", password="pw-1234567")
    bob = django_user_model.objects.create_user("bob", password="pw-1234567")
    own = _session("ada's", owner=ada)
    client.force_login(bob)
    kwargs = {"content_type": "application/json", "data": body} if body is not None else {}
    assert getattr(client, method)(f"/api/sessions/{own.pk}{suffix}", **kwargs).status_code == 404
    own.refresh_from_db()
    assert own.title == "ada's" and not own.archived
