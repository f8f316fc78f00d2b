"""Issue 38 §1, the ledger on a real PostgreSQL: a paid model step recorded twice is one
entry; a run's end records its GPU time; /api/ledger groups, and every total is the sum of
its entries; a loop's detail has `spent`."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import transaction
from django.utils import timezone

from agents_app.models import Agent
from agentsys.types import AgentStatus, new_agent_id
from hosts_app.models import Host, HostStatus
from ledger_app import selectors
from ledger_app.models import SpendEntry
from ledger_app.services import record_llm_steps
from runtime_app.chat_store import DjangoChatStore
from runtime_app.runtime_store import DjangoRuntimeStore
from scheduler_app.models import GPU, Run, ScheduleRequest
from scheduler_app.queue import claims as queue
from scheduler_app.queue import lifecycle

pytestmark = pytest.mark.django_db


def step(key: str, *, usd: float = 0.001, model: str = "demo-research", **tokens) -> dict:
    counts = {"input_tokens": 100, "output_tokens": 20, **tokens}
    return {"key": key, "usd": usd, "model": model, "provider": "demo", **counts}


def loop_agent() -> Agent:
    return Agent.objects.create(
        id=new_agent_id("research"), role="research", cls_path="x", goal="g", project="p"
    )


def test_a_step_recorded_twice_is_one_entry():
    agent = loop_agent()
    store = DjangoRuntimeStore()
    payload = {"steps": [step("prt_a"), step("prt_b", usd=0.25)], "skill": "wild_v2_iteration"}
    store.record_event(agent_id=agent.pk, kind="model_steps", payload=payload)
    # The daemon was killed after its write and before it knew: the worker sends it again.
    store.record_event(agent_id=agent.pk, kind="model_steps", payload=payload)
    entries = SpendEntry.objects.filter(loop_id=agent.pk)
    assert entries.count() == 2
    assert {e.key for e in entries} == {"llm:prt_a", "llm:prt_b"}
    assert selectors.spent_by_loop(agent.pk)["llm_usd"] == pytest.approx(0.251)


def test_a_chat_turns_steps_go_in_with_its_close(django_user_model):
    from agentsys.chat.store import TurnOutcome
    from sessions_app.models import ChatSession, ChatTurn

    person = django_user_model.objects.create_user("grace", password="x" * 12)
    session = ChatSession.objects.create(owner=person)
    turn = ChatTurn.objects.create(session=session, message="hi", status="running")
    outcome = TurnOutcome(status="done", text="hello", steps=[step("prt_chat")])
    store = DjangoChatStore()
    store.finish_turn(turn_id=turn.pk, outcome=outcome)
    store.finish_turn(turn_id=turn.pk, outcome=outcome)  # again: closed, still one entry
    [entry] = SpendEntry.objects.all()
    assert (entry.chat_session_id, entry.chat_turn_id, entry.user_id) == (
        session.pk,
        turn.pk,
        person.pk,
    )
    assert entry.input_tokens == 100 and entry.usd == Decimal("0.001")


def test_a_run_end_records_its_gpu_seconds_and_host_once():
    host = Host.objects.create(name="gpu-box", status=HostStatus.ONLINE)
    GPU.objects.bulk_create(GPU(host=host, index=i, source="declared") for i in range(2))
    parent = loop_agent()
    agent = Agent.objects.create(
        id=new_agent_id("executor"), role="executor", cls_path="x", project="p", parent=parent
    )
    run = Run.objects.create(name="r", command="true", agent=agent, gpu_required=2)
    request = queue.submit(agent=agent, gpu_required=2)
    from agentsys.scheduling import FifoFirstFit

    [_claimed] = queue.claim(host_id=host.pk, policy=FifoFirstFit())
    held_since = timezone.now() - timedelta(seconds=90)
    ScheduleRequest.objects.filter(pk=request.pk).update(started_at=held_since)
    with transaction.atomic():
        lifecycle.follow_agent(agent_id=agent.pk, status=AgentStatus.DONE)
    with transaction.atomic():  # a second end (a re-adoption's) changes nothing
        lifecycle.follow_agent(agent_id=agent.pk, status=AgentStatus.DONE)
    [entry] = SpendEntry.objects.filter(kind="gpu")
    assert entry.key == f"gpu:{run.pk}" and entry.run_id == run.pk and entry.gpus == 2
    assert entry.host == "gpu-box" and entry.loop_id == parent.pk
    assert 180 <= float(entry.gpu_seconds) < 190  # 2 GPUs x ~90 s
    assert selectors.spent_by_run(run.pk)["gpu_hours"] == pytest.approx(
        float(entry.gpu_seconds) / 3600
    )


def test_a_run_a_person_made_spends_in_their_name(django_user_model):
    """A run made through the API is its maker's (as fair share counts it), so the spend page
    lists its GPU time under that person, not under "no person"."""
    person = django_user_model.objects.create_user("ada", password="x" * 12)
    host = Host.objects.create(name="gpu-box", status=HostStatus.ONLINE)
    GPU.objects.create(host=host, index=0, source="declared")
    agent = Agent.objects.create(id=new_agent_id("executor"), role="executor", cls_path="x")
    run = Run.objects.create(name="r", command="true", agent=agent, gpu_required=1)
    Run.objects.filter(pk=run.pk).update(created_by=person)
    queue.submit(agent=agent, gpu_required=1)
    from agentsys.scheduling import FifoFirstFit

    [_claimed] = queue.claim(host_id=host.pk, policy=FifoFirstFit())
    with transaction.atomic():
        lifecycle.follow_agent(agent_id=agent.pk, status=AgentStatus.DONE)
    [entry] = SpendEntry.objects.filter(kind="gpu")
    assert entry.user_id == person.pk


def _spread() -> list[Agent]:
    loops = [loop_agent(), loop_agent()]
    record_llm_steps(steps=[step("a1", usd=0.1), step("a2", usd=0.2)], agent_id=loops[0].pk)
    record_llm_steps(
        steps=[step("b1", usd=0.4, model="other", reasoning_tokens=5)], agent_id=loops[1].pk
    )
    record_llm_steps(steps=[step("c1", usd=0.8)], chat_session_id="chat-1", user_id=None)
    return loops


@pytest.mark.parametrize("group_by", ["loop", "session", "user", "sweep", "model", "host"])
def test_api_groups_and_every_total_is_the_sum_of_its_entries(api, group_by):
    _spread()
    answer = api("get", f"/api/ledger?group_by={group_by}")
    assert answer.status_code == 200, answer.content
    body = answer.json()
    groups = body["groups"]
    entries = list(SpendEntry.objects.all())
    assert sum(g["llm_tokens"] for g in groups) == sum(e.tokens for e in entries)
    assert sum(g["llm_usd"] for g in groups) == pytest.approx(float(sum(e.usd for e in entries)))
    assert body["total"]["llm_tokens"] == sum(e.tokens for e in entries) == 4 * 120 + 5
    assert body["total"]["llm_usd"] == pytest.approx(1.5)
    assert sum(g["entries"] for g in groups) == len(entries) == 4


def test_api_groups_by_model_and_since(api):
    _spread()
    by_model = {g["key"]: g for g in api("get", "/api/ledger?group_by=model").json()["groups"]}
    assert by_model["demo-research"]["llm_usd"] == pytest.approx(1.1)
    assert by_model["other"]["llm_tokens"] == 125
    SpendEntry.objects.filter(key="llm:c1").update(created_at=timezone.now() - timedelta(days=3))
    since = (timezone.now() - timedelta(days=1)).isoformat().replace("+00:00", "Z")
    recent = api("get", f"/api/ledger?group_by=model&since={since}").json()
    assert recent["total"]["llm_usd"] == pytest.approx(0.7)


@pytest.mark.parametrize("query", ["group_by=planet", "since=yesterday", "group_by="])
def test_api_refuses_a_bad_group_or_time(api, query):
    assert api("get", f"/api/ledger?{query}").status_code == 422


def test_a_loops_detail_has_what_it_spent(api, tmp_path, settings):
    settings.AGENTSYS_WORKDIR = tmp_path
    loop = api("post", "/api/research", {"goal": "Tune lr", "workdir": str(tmp_path)}).json()
    record_llm_steps(steps=[step("x1", usd=0.5), step("x2", usd=0.25)], agent_id=loop["id"])
    spent = api("get", f"/api/research/{loop['id']}").json()["spent"]
    assert spent["llm_tokens"] == 240 and spent["llm_usd"] == pytest.approx(0.75)
    assert spent["gpu_hours"] == 0 and spent["wall_hours"] >= 0
    [entry] = SpendEntry.objects.filter(key="llm:x1")
    assert entry.sweep_id == loop["sweep_id"]  # the loop's sweep, resolved at write time


def test_the_spend_page_shows_the_groups_and_the_days(browser):
    _spread()
    page = browser.get("/spend/?by=model")
    assert page.status_code == 200
    text = page.content.decode()
    assert "demo-research" in text and 'id="spend-by-day"' in text and "$1.50" in text
    assert 'href="/spend/"' in text  # in the top nav


def test_a_time_with_any_offset_is_read_in_utc(api):
    """Schemathesis found it: an ISO offset beyond PostgreSQL's ±15:59 was a 500."""
    _spread()
    far = api("get", "/api/ledger?since=0514-03-09T22%3A44%3A05%2B17%3A41")
    assert far.status_code == 200 and far.json()["total"]["entries"] == 4
    assert api("get", "/api/ledger?since=0001-01-01T00%3A00%3A00%2B10%3A00").status_code == 422
