"""Budget defaults (issue 38 §2): a person sets one on the settings page, a chat session
through its API or its chat page; a loop started by that person, or from that chat, gets the
tightest of its own budget and those defaults, and says where each cap came from."""

from __future__ import annotations

import pytest
from django.test import Client

from accounts_app import services as accounts
from accounts_app.models import PersonSettings
from agents_app.models import Agent
from agentsys.research.settings import ResearchSettings
from hosts_app.models import Host
from runtime_app.chat_store import DjangoChatStore
from sessions_app.services import create_session

pytestmark = pytest.mark.django_db

FORM = {"llm_tokens": "", "llm_usd": "", "gpu_hours": "", "wall_hours": "", "on_cap": "hold_runs"}


@pytest.fixture
def workdir(tmp_path, settings):
    settings.AGENTSYS_WORKDIR = tmp_path
    return tmp_path


def enforced(loop_id: str) -> dict:
    """The budget the loop itself holds to (what its agent reads from its config)."""
    config = {**Agent.objects.get(pk=loop_id).config, "opencode_url": "http://x"}
    return ResearchSettings.from_config(config).budget


def test_the_settings_form_saves_a_default_and_shows_it(browser):
    saved = browser.post("/settings/budget/", {**FORM, "gpu_hours": "2", "on_cap": "stop_runs"})
    assert saved.status_code == 302 and saved["Location"] == "/settings/"
    assert PersonSettings.objects.get(user=browser.user).default_budget == {
        "gpu_hours": 2.0,
        "on_cap": "stop_runs",
    }
    page = browser.get("/settings/").content.decode()
    assert "Default budget of your loops: GPU hours 2; at a cap stop_runs." in page
    assert 'name="gpu_hours" value="2.0"' in page
    assert '<option value="stop_runs" selected>' in page
    # Every cap left empty: no default any more.
    assert browser.post("/settings/budget/", FORM).status_code == 302
    assert PersonSettings.objects.get(user=browser.user).default_budget == {}
    assert 'id="budget-now">none<' in browser.get("/settings/").content.decode()


@pytest.mark.parametrize(
    ("field", "typed", "complaint"),
    [
        ("gpu_hours", "-1", "GPU hours: Ensure this value is greater than or equal to 0."),
        ("llm_usd", "five", "Model spend (USD): Enter a number."),
        ("wall_hours", "inf", "Wall-clock hours: Enter a number."),
        ("on_cap", "panic", "Select a valid choice. panic is not one of the available choices."),
    ],
)
def test_a_bad_default_is_400_saying_why_and_keeps_what_was_typed(browser, field, typed, complaint):
    accounts.set_default_budget(user=browser.user, budget={"llm_usd": 7})
    response = browser.post("/settings/budget/", {**FORM, "llm_tokens": "5000", field: typed})
    assert response.status_code == 400
    page = response.content.decode()
    assert complaint in page and "Default budget not saved" in page
    assert 'name="llm_tokens" value="5000"' in page  # nothing typed is lost
    if field != "on_cap":
        assert f'name="{field}" value="{typed}"' in page
    assert PersonSettings.objects.get(user=browser.user).default_budget == {
        "llm_usd": 7.0,
        "on_cap": "hold_runs",
    }


def test_a_persons_default_and_a_loops_own_budget_give_the_tightest(workdir, browser):
    accounts.set_default_budget(
        user=browser.user, budget={"llm_usd": 1, "gpu_hours": 10, "on_cap": "stop_runs"}
    )
    _, token = accounts.create_token(user=browser.user, name="scripts")
    by_token = Client(HTTP_AUTHORIZATION=f"Bearer {token}")  # not logged in
    body = {"goal": "Tune lr", "workdir": str(workdir), "budget": {"llm_usd": 5, "gpu_hours": 2}}
    for person in (by_token, browser):  # the person's API token, then their login
        started = person.post("/api/research", body, content_type="application/json")
        assert started.status_code == 201, started.content
        loop = person.get(f"/api/research/{started.json()['id']}").json()
        assert loop["budget"] == {"llm_usd": 1.0, "gpu_hours": 2.0}
        assert loop["budget_from"] == {"llm_usd": "person", "gpu_hours": "loop", "on_cap": "person"}
        assert enforced(loop["id"]) == {"llm_usd": 1.0, "gpu_hours": 2.0, "on_cap": "stop_runs"}


def test_a_loop_without_any_budget_has_none(browser, workdir):
    body = {"goal": "Tune lr", "workdir": str(workdir)}
    started = browser.post("/api/research", body, content_type="application/json").json()
    assert started["budget"] is None and started["budget_from"] is None
    assert enforced(started["id"]) == {}


def test_a_chats_default_applies_to_the_loop_it_spawns(browser, api, workdir):
    accounts.set_default_budget(user=browser.user, budget={"gpu_hours": 3, "llm_usd": 0.5})
    session = create_session(owner=browser.user)
    put = api("put", f"/api/sessions/{session.pk}/budget", {"gpu_hours": 1, "wall_hours": 8})
    assert put.status_code == 200, put.content
    assert api("get", f"/api/sessions/{session.pk}/budget").json() == {
        "llm_tokens": None,
        "llm_usd": None,
        "gpu_hours": 1.0,
        "wall_hours": 8.0,
        "on_cap": "hold_runs",
    }
    # The chat's session agent spawns a loop (its <spawn_research> action).
    store = DjangoChatStore()
    host = Host.objects.create(name="h1").pk
    l1 = store.session_agent(session_id=session.pk, host_id=host)["record"].id
    loop_id = store.start_research(
        agent_id=l1, session_id=session.pk, goal="find lr", max_iterations=2
    )
    loop = api("get", f"/api/research/{loop_id}").json()
    assert loop["budget"] == {"gpu_hours": 1.0, "wall_hours": 8.0, "llm_usd": 0.5}
    assert loop["budget_from"] == {
        "gpu_hours": "session",
        "wall_hours": "session",
        "llm_usd": "person",
    }
    assert enforced(loop_id)["gpu_hours"] == 1.0


@pytest.mark.parametrize(
    "body",
    [
        {"gpu_hours": -1},
        {"gpu_hours": "lots"},
        {"gpu_hours": 1, "on_cap": "panic"},
        {"dollars": 5},
        "5",
    ],
)
def test_a_bad_chat_default_is_4xx_and_changes_nothing(api, body):
    session = create_session()
    api("put", f"/api/sessions/{session.pk}/budget", {"llm_usd": 2})
    response = api("put", f"/api/sessions/{session.pk}/budget", body)
    assert 400 <= response.status_code < 500, response.content
    session.refresh_from_db()
    assert session.default_budget == {"llm_usd": 2.0, "on_cap": "hold_runs"}
    assert api("put", "/api/sessions/chat-none/budget", {"llm_usd": 1}).status_code == 404


def test_the_chat_page_sets_its_default_and_refuses_a_bad_one(browser):
    session = create_session(owner=browser.user)
    page = browser.get(f"/chat/{session.pk}/").content.decode()
    assert 'id="chat-budget-now">none<' in page
    saved = browser.post(f"/chat/{session.pk}/budget/", {**FORM, "llm_usd": "3"})
    assert saved.status_code == 302 and saved["Location"] == f"/chat/{session.pk}/"
    page = browser.get(f"/chat/{session.pk}/").content.decode()
    assert 'id="chat-budget-now">Model spend (USD) 3; at a cap hold_runs<' in page
    refused = browser.post(f"/chat/{session.pk}/budget/", {**FORM, "llm_usd": "-3"})
    assert refused.status_code == 400
    assert "Ensure this value is greater than or equal to 0." in refused.content.decode()
    assert 'name="llm_usd" value="-3"' in refused.content.decode()
    session.refresh_from_db()
    assert session.default_budget == {"llm_usd": 3.0, "on_cap": "hold_runs"}
