"""Every memory query the system issues is served by an index: EXPLAIN each one on a table
large and varied enough that PostgreSQL would rather scan it whole if no index fit."""

import json
import random
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agentsys.memory import EntryQuery
from bench.memory_data import World
from memory_app import selectors
from memory_app.context import assemble_context

pytestmark = pytest.mark.django_db
WORLD = World(60_000)


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker):
    """Populated once for the module (committed), emptied after it."""
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        WORLD.populate(cursor)
    yield WORLD
    with django_db_blocker.unblock(), connection.cursor() as cursor:
        cursor.execute("TRUNCATE memory_app_memoryentry")


def _plan_nodes(plan: dict):
    yield plan
    for child in plan.get("Plans", []):
        yield from _plan_nodes(child)


def _explained(run) -> list[tuple[str, list[str]]]:
    """Each statement `run` issues, with the node types of its plan."""
    with CaptureQueriesContext(connection) as captured:
        run()
    plans = []
    with connection.cursor() as cursor:
        for query in captured.captured_queries:
            sql = query["sql"]
            if not sql.lstrip().upper().startswith(("SELECT", "(SELECT")):
                continue
            cursor.execute("EXPLAIN (FORMAT JSON) " + sql)
            raw = cursor.fetchone()[0]
            plan = (json.loads(raw) if isinstance(raw, str) else raw)[0]["Plan"]
            plans.append((sql, [node["Node Type"] for node in _plan_nodes(plan)]))
    assert plans, "the query issued no SELECT"
    return plans


def _hot_queries(world: World):
    rng = random.Random(7)
    run_agent, run_scope = world.run_agent(rng)
    sweep_agent, sweep_scope = world.sweep_agent(rng)
    now = timezone.now()
    return {
        "my entries": lambda: selectors.own_entries(agent_id=run_agent, limit=500),
        "inbox": lambda: selectors.inbox(agent_id=run_agent),
        "read_self": lambda: selectors.query_entries(EntryQuery(agent_id=sweep_agent)),
        "context of a run agent": lambda: assemble_context(
            agent_id=run_agent, scope=run_scope, token_budget=4000
        ),
        "context of a sweep agent": lambda: assemble_context(
            agent_id=sweep_agent, scope=sweep_scope, token_budget=4000
        ),
        "memory bank": lambda: selectors.memory_bank(project=run_scope["project"]),
        "run, types": lambda: selectors.query_entries(
            EntryQuery(run=run_scope["run"], types=("metrics", "alert"))
        ),
        "sweep, type_not": lambda: selectors.query_entries(
            EntryQuery(sweep=sweep_scope["sweep"], type_not=("metrics",))
        ),
        "session, since/before": lambda: selectors.query_entries(
            EntryQuery(
                session=run_scope["session"],
                since=now - timedelta(hours=5),
                before=now - timedelta(hours=1),
            )
        ),
        "project, tags": lambda: selectors.query_entries(
            EntryQuery(project=run_scope["project"], tags=("lr", "reward"))
        ),
        "tags alone": lambda: selectors.query_entries(EntryQuery(tags=("arch",))),
        "target": lambda: selectors.query_entries(EntryQuery(target_id=run_agent)),
        "one type": lambda: selectors.query_entries(EntryQuery(types=("reflection",), limit=20)),
        "role, types": lambda: selectors.query_entries(
            EntryQuery(role="orchestrator", types=("plan", "reflection"))
        ),
        "no filter": lambda: selectors.query_entries(EntryQuery(limit=50)),
        "memories a person browses": lambda: selectors.memories(project=run_scope["project"]),
    }


QUERY_NAMES = list(_hot_queries(World(1)))


@pytest.mark.parametrize("name", QUERY_NAMES)
def test_hot_query_uses_no_sequential_scan(world, name):
    for sql, nodes in _explained(_hot_queries(world)[name]):
        assert "Seq Scan" not in nodes, f"{name}: {nodes}\n{sql}"
        assert any("Index" in node for node in nodes), f"{name}: {nodes}\n{sql}"


def test_the_check_can_fail(world):
    """A filter no index serves is caught: the check above is not vacuous."""
    from memory_app.models import MemoryEntry

    [(_, nodes)] = _explained(lambda: MemoryEntry.objects.filter(data__i=5).count())
    assert "Seq Scan" in nodes
