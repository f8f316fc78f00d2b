"""Memory on PostgreSQL: MemoryView writes, queries with every filter, inbox and ack,
context assembly by scope, budget truncation, and the memories a person manages."""

from datetime import UTC, datetime, timedelta

import pytest

from agentsys.memory import ContextLimits, EntryQuery
from agentsys.types import EntryType
from memory_app import selectors
from memory_app.models import MemoryEntry
from runtime_app.memory_view import DjangoMemoryView

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def entry(minute: int, type="context", agent="executor-a", tags=(), **fields) -> MemoryEntry:
    fields.setdefault("project", "p")
    return MemoryEntry.objects.create(
        type=type,
        agent_id=agent,
        tags=list(tags),
        data=fields.pop("data", {"m": minute}),
        created_at=T0 + timedelta(minutes=minute),
        **fields,
    )


@pytest.fixture
def fixture_set():
    return [
        entry(0, "plan", "research-1", ["lr"], session="s1", role="orchestrator"),
        entry(1, "metrics", "executor-a", ["lr", "sched"], session="s1", sweep="w1", run="r1"),
        entry(2, "metrics", "executor-b", ["reward"], session="s1", sweep="w1", run="r2"),
        entry(3, "alert", "executor-b", ["other"], session="s1", sweep="w1", run="r2"),
        entry(4, "reflection", "research-1", [], session="s1", role="orchestrator"),
        entry(5, "context", "research-2", [], session="s2", project="p"),
        entry(6, "context", "research-9", [], project="elsewhere"),
        entry(7, "message", "research-1", [], target_id="executor-a", session="s1"),
    ]


def keys(found) -> list[int]:
    return [e.data["m"] for e in found]


def q(**filters):
    return keys(selectors.query_entries(EntryQuery(**filters)))


def test_tags_are_any_of(fixture_set):
    assert sorted(q(tags=["lr"])) == [0, 1]
    assert sorted(q(tags=["lr", "reward"])) == [0, 1, 2]


def test_scope_filters(fixture_set):
    assert q(project="elsewhere") == [6]
    assert q(session="s1") == [7, 4, 3, 2, 1, 0]
    assert q(sweep="w1") == [3, 2, 1]
    assert q(run="r2") == [3, 2]
    assert q(agent_id="research-1") == [7, 4, 0]
    assert q(target_id="executor-a") == [7]
    assert q(role="orchestrator") == [4, 0]


def test_type_one_or_many_and_type_not(fixture_set):
    assert q(types=["metrics"]) == [2, 1]
    assert q(types=["metrics", "alert", "plan"]) == [3, 2, 1, 0]
    assert q(session="s1", type_not=["metrics", "message"]) == [4, 3, 0]


def test_since_is_inclusive_and_before_exclusive(fixture_set):
    at = T0 + timedelta(minutes=2)
    assert q(since=at, before=at + timedelta(minutes=2)) == [3, 2]
    assert 4 not in q(before=T0 + timedelta(minutes=4))


def test_combined_filters(fixture_set):
    assert q(project="p", session="s1", types=["metrics", "alert"], tags=["reward", "other"]) == [
        3,
        2,
    ]
    assert q(sweep="w1", agent_id="executor-b", since=T0 + timedelta(minutes=3)) == [3]


def test_limit_and_order(fixture_set):
    assert q(project="p", limit=2) == [7, 5]
    assert q(project="p", limit=2, order="oldest") == [0, 1]
    assert q(types=["metrics", "alert", "plan"], limit=2, order="oldest") == [0, 1]


@pytest.mark.parametrize(
    ("filters", "message"),
    [
        ({"types": ["nope"]}, "unknown entry type 'nope'"),
        ({"type_not": ["PLAN"]}, "unknown entry type"),
        ({"limit": 0}, "limit must be between"),
        ({"order": "random"}, "order must be"),
    ],
)
def test_bad_filters_are_named(filters, message):
    with pytest.raises(ValueError, match=message):
        EntryQuery(**filters)


# -- MemoryView ------------------------------------------------------------------------------


def view(agent_id="executor-r1", role="executor", **scope) -> DjangoMemoryView:
    scope.setdefault("project", "p")
    return DjangoMemoryView(agent_id, role, scope)


def test_write_fills_in_the_agents_scope_and_is_read_at_once():
    mine = view(session="s1", sweep="w1", run="r1")
    key = mine.write(type=EntryType.PLAN, data={"step": 1}, tags=["plan"])
    [found] = mine.read_self()
    assert (found.key, found.type, found.data, found.tags) == (key, "plan", {"step": 1}, ("plan",))
    stored = MemoryEntry.objects.get(pk=key)
    assert len(key) == 12 and int(key, 16) >= 0
    assert (stored.agent_id, stored.role, stored.project, stored.session) == (
        "executor-r1",
        "executor",
        "p",
        "s1",
    )
    assert (stored.sweep, stored.run) == ("w1", "r1")


def test_messages_reach_the_inbox_until_acknowledged():
    sender, receiver = view("research-1", "orchestrator"), view("executor-x")
    first = sender.msg(target_id="executor-x", data={"text": "use lr=3e-4"}, tags=["steer"])
    second = sender.msg(target_id="executor-x", data={"text": "and bs=64"})
    assert [e.key for e in receiver.read_inbox()] == [first, second]
    assert receiver.ack(first) is True
    assert receiver.ack(first) is False  # read already
    assert sender.ack(second) is False  # not the sender's to acknowledge
    assert [e.key for e in receiver.read_inbox()] == [second]
    with pytest.raises(ValueError, match="target"):
        sender.msg(target_id="", data={})


# -- context assembly ------------------------------------------------------------------------


def test_my_entries_oldest_first_without_raw_files_then_inbox():
    me = "executor-r1"
    entry(1, "plan", me, data={"n": "first"})
    entry(2, "raw_file", me, data={"n": "log.txt"})
    entry(3, "result", me, ["done"], data={"n": "second"})
    entry(4, "message", "research-1", target_id=me, data={"n": "hello"})
    text = view(me).assemble_context(10_000)
    assert text.startswith(
        '## My Entries\n[plan] executor-r1: {"n": "first"}\n'
        '[result] executor-r1 [done]: {"n": "second"}\n\n'
        '## Inbox\n[message] research-1 -> executor-r1: {"n": "hello"}'
    )
    assert "log.txt" not in text


def _scoped_world():
    entry(
        1, "context", "executor-r2", data={"n": "sibling run"}, session="s1", sweep="w1", run="r2"
    )
    entry(2, "metrics", "executor-r2", data={"n": "sibling metrics"}, session="s1", sweep="w1")
    entry(3, "reflection", "research-1", data={"n": "session lesson"}, session="s1")
    entry(4, "alert", "executor-w2", data={"n": "other sweep"}, session="s1", sweep="w2")
    entry(5, "reflection", "research-0", data={"n": "old session"}, session="s0")
    entry(6, "context", "research-z", data={"n": "other project"}, project="q")


def test_run_level_agent_widens_to_sweep_session_and_project():
    _scoped_world()
    text = view(session="s1", sweep="w1", run="r1").assemble_context(10_000)
    sections = [line for line in text.splitlines() if line.startswith("## ")]
    assert sections == ["## Sweep Context", "## Session Context", "## Project Context"]
    sweep, session, project = text.split("## ")[1:]
    assert "sibling run" in sweep and "sibling metrics" not in text  # metrics never widen
    assert "session lesson" in session and "other sweep" in session
    assert "sibling run" not in session  # shown once, at the narrowest level
    assert "old session" in project and "other project" not in text


def test_sweep_level_agent_gets_session_then_project():
    _scoped_world()
    text = view("research-w1", "orchestrator", session="s1", sweep="w1").assemble_context(10_000)
    assert [line for line in text.splitlines() if line.startswith("## ")] == [
        "## Session Context",
        "## Project Context",
    ]


def test_session_level_agent_gets_project_context_only():
    _scoped_world()
    text = view("research-s1", "orchestrator", session="s1").assemble_context(10_000)
    assert [line for line in text.splitlines() if line.startswith("## ")] == ["## Project Context"]
    assert "session lesson" in text and "old session" in text


def test_each_level_keeps_its_newest_entries_up_to_its_limit():
    for minute in range(10):
        entry(minute, "context", f"executor-{minute}", data={"n": minute}, session="s1")
    mine = view(session="s1", sweep="w1", run="r1")
    mine.limits = ContextLimits(session=3, project=2)
    text = mine.assemble_context(10_000)
    session = text.split("## Session Context\n")[1].split("\n\n")[0]
    assert [line.split(": ", 1)[1] for line in session.splitlines()] == [
        '{"n": 9}',
        '{"n": 8}',
        '{"n": 7}',
    ]
    project = text.split("## Project Context\n")[1]
    assert project.count("\n") == 1  # two lines, neither one already shown above
    assert '{"n": 6}' in project and '{"n": 5}' in project


def test_budget_truncation():
    me = "executor-r1"
    for minute in range(50):
        entry(minute, "plan", me, data={"text": "x" * 180})
    text = view(me).assemble_context(100)
    assert len(text) <= 416 and text.endswith("... [truncated]")
    assert text.startswith("## My Entries\n[plan] executor-r1:")


def test_same_input_same_text():
    _scoped_world()
    entry(7, "context", "executor-r9", data={"b": 1, "a": [1, 2]}, session="s1")
    mine = view(session="s1", sweep="w1", run="r1")
    assert mine.assemble_context(500) == mine.assemble_context(500)
    assert '{"a": [1, 2], "b": 1}' in mine.assemble_context(10_000)  # keys in one order


# -- memories a person manages ----------------------------------------------------------------


def test_deactivated_or_deleted_memories_never_reach_a_prompt(client, agentsys_config):
    agentsys_config(api_token="t0ken-for-tests-0123456789abcdef", project="p")
    auth = {"HTTP_X_AUTH_TOKEN": "t0ken-for-tests-0123456789abcdef"}
    learned = entry(1, "reflection", "research-1", ["lr"], data={"text": "lr 3e-4 is stable"})
    doubtful = entry(2, "reflection", "research-1", data={"text": "bigger batch always helps"})
    note = client.post(
        "/api/memories",
        {"text": "GPU 3 overheats", "tags": ["hw"]},
        content_type="application/json",
        **auth,
    ).json()
    me = view("research-2", "orchestrator", session="s9")
    bank = me.memory_bank()
    assert bank.splitlines() == [
        "- [hw] GPU 3 overheats",
        "- bigger batch always helps",
        "- [lr] lr 3e-4 is stable",
    ]
    client.patch(
        f"/api/memories/{doubtful.key}",
        {"active": False},
        content_type="application/json",
        **auth,
    )
    client.delete(f"/api/memories/{note['id']}", **auth)
    for rendered in (me.memory_bank(), me.assemble_context(10_000)):
        assert "bigger batch" not in rendered and "overheats" not in rendered
        assert "lr 3e-4 is stable" in rendered
    assert MemoryEntry.objects.filter(pk=learned.pk, active=True).exists()
