"""Issue 38 §1, the ledger where a person looks: the run page shows its GPU-hours and host,
the loop page what the loop spent, the chat its total and each turn's, the queue page each
person's today and this week. Read as text, the way a person reads the page."""

import re
from datetime import timedelta
from decimal import Decimal
from html import unescape

import pytest
from django.utils import timezone

from ledger_app.models import SpendEntry
from ledger_app.selectors import week_start
from ledger_app.services import record_llm_steps, record_run_gpu
from scheduler_app.models import Run
from tests.integration.test_ledger import step

pytestmark = pytest.mark.django_db


def shown(page, element_id: str) -> str:
    """The words of the element `element_id` on the page, tags and extra spaces removed."""
    html = page.content.decode()
    found = re.search(rf'id="{element_id}"[^>]*>(.*?)</(dd|p|section|tbody)>', html, re.S)
    assert found, f"no #{element_id} on the page"
    inline = re.sub(r"</?(bdi|span|a)\b[^>]*>", "", found.group(1))
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", inline)).split())


def test_the_run_page_shows_its_gpu_hours_and_host(browser):
    run = Run.objects.create(name="train", command="true", gpu_required=2, status="done")
    ended = timezone.now()
    record_run_gpu(
        run_id=run.pk, gpus=2, started=ended - timedelta(minutes=45), ended=ended, host="gpu-7"
    )
    page = browser.get(f"/runs/{run.pk}/")
    assert shown(page, "run-gpu-hours") == "1.50 h (2 GPUs on gpu-7)"
    head = browser.get(f"/runs/{run.pk}/?part=head", HTTP_HX_REQUEST="true")
    assert shown(head, "run-gpu-hours") == "1.50 h (2 GPUs on gpu-7)"  # the live refresh too


def test_a_running_run_says_its_gpu_time_is_counted_at_its_end(browser):
    run = Run.objects.create(name="train", command="true", gpu_required=1, status="running")
    assert shown(browser.get(f"/runs/{run.pk}/"), "run-gpu-hours") == "counted at its end"


def test_the_loop_page_shows_what_the_loop_spent(browser, api, tmp_path, settings):
    settings.AGENTSYS_WORKDIR = tmp_path
    loop = api("post", "/api/research", {"goal": "Tune lr", "workdir": str(tmp_path)}).json()
    record_llm_steps(steps=[step("x1", usd=0.5), step("x2", usd=0.75)], agent_id=loop["id"])
    ended = timezone.now()
    record_run_gpu(
        run_id="run-a",
        gpus=4,
        started=ended - timedelta(minutes=30),
        ended=ended,
        loop_id=loop["id"],
    )
    page = browser.get(f"/research/{loop['id']}/")
    assert page.status_code == 200
    assert shown(page, "loop-spent-tokens") == "240"
    assert shown(page, "loop-spent-usd") == "$1.25"
    assert shown(page, "loop-spent-gpu") == "2.00 h"
    assert re.fullmatch(r"\d+ min", shown(page, "loop-spent-wall"))  # a new loop


def test_the_chat_shows_its_total_and_each_turns(browser):
    from sessions_app.models import ChatMessage, ChatSession, ChatTurn

    session = ChatSession.objects.create(owner=browser.user)
    for seq, (usd, key) in enumerate([(0.002, "t1"), (0.0305, "t2")]):
        turn = ChatTurn.objects.create(session=session, message="hi", status="done")
        ChatMessage.objects.create(session=session, seq=2 * seq + 1, role="user", turn=turn)
        ChatMessage.objects.create(
            session=session, seq=2 * seq + 2, role="assistant", content="ok", turn=turn
        )
        record_llm_steps(
            steps=[step(key, usd=usd, input_tokens=1000)],
            chat_session_id=session.pk,
            user_id=browser.user.pk,
            chat_turn_id=turn.pk,
        )
    page = browser.get(f"/chat/{session.pk}/")
    assert shown(page, "chat-spent") == "2,040 tokens · $0.0325"
    per_turn = re.findall(r'class="muted small turn-spent">([^<]*)<', page.content.decode())
    assert per_turn == ["1,020 tokens · $0.002", "1,020 tokens · $0.0305"]


def test_the_queue_page_shows_each_persons_today_and_this_week(browser, django_user_model):
    grace = django_user_model.objects.create_user("grace", password="x" * 12)
    now = timezone.now()
    record_llm_steps(steps=[step("g1", usd=2)], chat_session_id="c", user_id=grace.pk)
    ended = now
    record_run_gpu(
        run_id="run-g", gpus=1, started=ended - timedelta(hours=3), ended=ended, user_id=grace.pk
    )
    record_llm_steps(steps=[step("a1", usd=0.5)], chat_session_id="d", user_id=browser.user.pk)
    today, monday = week_start(now)
    if today > monday:  # an earlier day of this week counts in the week, not today
        SpendEntry.objects.filter(key="llm:a1").update(created_at=monday + timedelta(minutes=1))
    # Last week's counts in neither.
    record_llm_steps(steps=[step("old", usd=100)], chat_session_id="d", user_id=grace.pk)
    SpendEntry.objects.filter(key="llm:old").update(created_at=monday - timedelta(minutes=1))
    rows = shown(browser.get("/queue/"), "people-spent")
    assert "grace $2.00 3.00 h GPU $2.00 3.00 h GPU" in rows
    ada_today = "$0" if today > monday else "$0.50"
    assert f"ada {ada_today} 0 h GPU $0.50 0 h GPU" in rows
    assert "100" not in rows
    assert Decimal(str(SpendEntry.objects.get(key="llm:old").usd)) == Decimal(100)
