"""A name a person gave (a chat's title, a run's, a sweep's, a loop's goal, a host's) that holds
right-to-left control characters (U+202E) is isolated wherever a page shows it, so it cannot
reverse the words around it (issue 34): every time it is shown as text, it is in a <bdi>."""

import re

import pytest

from agents_app.models import Agent
from hosts_app.models import Host
from research_app.models import ResearchLoop
from scheduler_app.models import Alert, Run, Sweep
from sessions_app.models import ChatSession

pytestmark = pytest.mark.django_db

NAME = "lr\u202etxt.exe"  # shows as "lrexe.txt" unless isolated, and reverses what follows


def unisolated(page: str) -> list[str]:
    """Each place the name is shown as text outside a <bdi> (attributes and <title> aside)."""
    found = []
    for match in re.finditer(re.escape(NAME), page):
        before = page[: match.start()]
        in_a_tag = before.rfind("<") > before.rfind(">")
        in_title = before.rfind("<title>") > before.rfind("</title>")
        if not (in_a_tag or in_title or before.endswith("<bdi>")):
            found.append(page[max(0, match.start() - 100) : match.end() + 30])
    return found


def test_a_name_with_a_right_to_left_override_is_isolated_on_every_page(browser):
    session = ChatSession.objects.create(title=NAME, owner=browser.user)
    sweep = Sweep.objects.create(name=NAME, goal=NAME)
    agent = Agent.objects.create(
        id="orchestrator-bidi", role="research", cls_path="x", project="p", goal=NAME
    )
    loop = ResearchLoop.objects.create(agent=agent, goal=NAME, sweep=sweep, state={})
    run = Run.objects.create(
        name=NAME, command="true", sweep=sweep, chat_session=session, status="running"
    )
    Alert.objects.create(run=run, message="NaN loss", choices=["stop"])
    Host.objects.create(name=NAME)
    pages = (
        "/",
        "/chat/",
        f"/chat/{session.pk}/",
        "/runs/",
        f"/runs/{run.pk}/",
        "/sweeps/",
        f"/sweeps/{sweep.pk}/",
        "/research/",
        f"/research/{loop.agent_id}/",
        "/agents/",
        "/alerts/",
        "/queue/",
    )
    for path in pages:
        page = browser.get(path).content.decode()
        assert f"<bdi>{NAME}" in page, path
        assert unisolated(page) == [], path


def test_a_user_name_with_a_right_to_left_override_is_isolated_in_the_nav(
    client, django_user_model
):
    user = django_user_model.objects.create_user(NAME, password="x" * 12)
    client.force_login(user)
    page = client.get("/runs/").content.decode()
    assert NAME in page and unisolated(page) == []
