"""A live page is drawn from the rows and then follows the agents feed from the position it
was rendered at (data-feed-after). A change that commits while the page reads its rows must
be in what is drawn or in what is replayed, never in neither: the position is read before
the rows. (Read after them, a loop stopped from the tree stayed "running" on the redrawn
page: the stop committed between the two reads, so neither showed it.)"""

from __future__ import annotations

import re

import pytest
from django.db import connection

from agents_app.models import Agent
from agentsys.types import AgentStatus
from events_app.events import AGENTS_STREAM, record_event
from research_app.models import ResearchLoop
from tests.factories import one_of_everything

pytestmark = pytest.mark.django_db

# What every page reads before its own rows: the login, and the feed position itself.
NOT_ROWS = ("django_session", "auth_user", "events_app_eventstream")


def _stop_after_the_first_row_read(agent_id: str, landed: list):
    """A database wrapper: right after the page's first read of its own rows, the agent is
    stopped and its event recorded, as runagentd would commit it from another process."""

    def wrapper(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if not landed and not any(table in sql for table in NOT_ROWS):
            landed.append(None)  # first: the writes below pass through this wrapper too
            Agent.objects.filter(pk=agent_id).update(status=AgentStatus.STOPPED)
            event = record_event(
                stream=AGENTS_STREAM,
                kind="stopped",
                agent_id=agent_id,
                payload={"status": "stopped"},
                publish_live=False,
            )
            landed[0] = event.seq
        return result

    return wrapper


def _pages(rows: dict) -> dict[str, str]:
    loop = ResearchLoop.objects.create(agent=rows["l1"], goal="Find the lr")
    return {
        "home": "/",
        "agents": "/agents/",
        "runs": "/runs/",
        "run": f"/runs/{rows['run'].pk}/",
        "queue": "/queue/",
        "sweep": f"/sweeps/{rows['sweep'].pk}/",
        "alerts": "/alerts/",
        "research loop": f"/research/{loop.agent_id}/",
    }


@pytest.mark.parametrize(
    "page", ["home", "agents", "runs", "run", "queue", "sweep", "alerts", "research loop"]
)
def test_a_change_while_the_page_reads_its_rows_is_replayed(browser, page):
    rows = one_of_everything()
    url = _pages(rows)[page]
    landed: list = []
    with connection.execute_wrapper(_stop_after_the_first_row_read(rows["l1"].id, landed)):
        response = browser.get(url)
    assert response.status_code == 200
    assert landed, f"{url} read no rows: nothing was tested"
    after = int(re.search(r'data-feed-after="(\d+)"', response.content.decode()).group(1))
    assert after < landed[0], (
        f"{url} follows the feed from {after}: the stop recorded at {landed[0]} while it read "
        "its rows is neither drawn nor replayed"
    )
