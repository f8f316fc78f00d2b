"""Small words a person reads (issue 34): "just now", not "0 minutes ago"; no red Stop on an
alert whose run has ended; the settings page names a .env only where there is one."""

from datetime import timedelta

import pytest
from django.utils import timezone

from agents_app.models import Agent
from scheduler_app.models import Alert, Run, Sweep
from sessions_app.models import ChatSession

pytestmark = pytest.mark.django_db


def text_of(browser, path: str) -> str:
    """The page with Django's no-break spaces ("3\xa0hours") as plain ones."""
    return browser.get(path).content.decode().replace("\xa0", " ")


def test_a_moment_ago_is_just_now_and_later_the_largest_unit(browser):
    run = Run.objects.create(name="fresh", command="true")
    Sweep.objects.create(name="fresh sweep")
    ChatSession.objects.create(title="fresh chat", owner=browser.user)
    for path in ("/runs/", "/sweeps/", "/chat/"):
        page = text_of(browser, path)
        assert "just now" in page and "0 minutes" not in page, path
    Run.objects.filter(pk=run.pk).update(created_at=timezone.now() - timedelta(hours=3, minutes=5))
    page = text_of(browser, "/runs/")
    assert "3 hours ago" in page and "5 minutes" not in page


def _alert_on(run: Run) -> Alert:
    return Alert.objects.create(
        run=run, agent_id=run.agent_id or "", message=f"NaN loss in {run.name}", choices=["stop"]
    )


def _buttons_of(page: str, alert: Alert) -> str:
    return page.split(f'id="alert-{alert.pk}"')[1].split("</li>")[0]


def test_an_alert_whose_run_has_ended_offers_no_stop(browser):
    live = _alert_on(Run.objects.create(name="live", command="true", status="running"))
    ended = _alert_on(Run.objects.create(name="over", command="true", status="done"))
    agent = Agent.objects.create(id="executor-gone", role="executor", cls_path="x", project="p")
    Agent.objects.filter(pk=agent.pk).update(status="failed")
    by_agent = Alert.objects.create(agent_id=agent.pk, message="stuck", choices=["stop"])
    page = browser.get("/alerts/").content.decode()
    assert 'value="stop"' in _buttons_of(page, live)
    for alert, what in ((ended, "the run has ended"), (by_agent, "the agent has ended")):
        shown = _buttons_of(page, alert)
        assert 'value="stop"' not in shown and "danger" not in shown
        assert 'value="acknowledge"' in shown and what in shown


def test_settings_name_a_dotenv_only_where_there_is_one(browser, monkeypatch, tmp_path):
    monkeypatch.setattr("accounts_app.views.dotenv_path", lambda: tmp_path / ".env")
    help_line = browser.get("/settings/").content.decode().split('id="model-help">')[1]
    assert "see <code>.env</code>" not in help_line and "this host has none" in help_line
    (tmp_path / ".env").write_text("MODEL_ID=x\n")
    help_line = browser.get("/settings/").content.decode().split('id="model-help">')[1]
    assert f"here in <code>{tmp_path / '.env'}</code>" in help_line
