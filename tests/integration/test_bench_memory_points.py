"""bench/memory.py's figures time what their names say (issue 40 §3), at a tiny size on the
real memory table in PostgreSQL: populate_1e6_entries_s from before the table is emptied to
the filled table analysed, every row of it committed inside; assemble_context_p95_ms and
write_p95_ms each from just before one call of assemble_context (write_entry) to its return,
the entry committed by then, with nothing else timed and the warming calls left out. Checked
against the statements PostgreSQL was sent and the calls the test watched.

bench/scale_history.py times the same at 10^7 entries with these same functions
(test_bench_history_points.py); both watch PostgreSQL through tests/sql_watch.py."""

from __future__ import annotations

import random
import time

import pytest

from bench import memory
from bench._report import percentile
from bench.memory_data import World
from bench.spans import percentile_ms, span_s
from memory_app import context, services
from memory_app.models import MemoryEntry
from tests.call_watch import watch_calls
from tests.sql_watch import Statement, bounds_ms, committed_by, statements, watch_commits

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
ENTRIES = 2000


def each_span_is_its_call(spans, calls, sent: list[Statement]) -> None:
    """One watched call a span, begun and returned inside it, and every statement sent in
    the span sent by that call: nothing else was timed."""
    for span, call in zip(spans, calls, strict=True):
        assert [c for c in calls if span.began <= c.began <= span.ended] == [call]
        assert span.began <= call.began and call.returned <= span.ended
        inside = [s for s in sent if span.began <= s.began <= span.ended]
        assert inside, "the call sent nothing to PostgreSQL"
        assert all(call.began <= s.began and s.ended <= call.returned for s in inside)


@pytest.fixture
def world():
    """A tiny world, filled."""
    made = World(ENTRIES)
    memory.fresh_table(made)
    return made


def test_populate_runs_from_before_the_truncate_to_the_table_filled_and_analysed(monkeypatch):
    MemoryEntry.objects.create(key="left-before", type="context", project="p")
    world = World(ENTRIES)
    commits = watch_commits(monkeypatch)
    with statements() as sent:
        span = memory.fresh_table(world)
    assert [s.sql.split()[0] for s in sent] == ["TRUNCATE", "INSERT", "ANALYZE"]
    truncate, insert, analyze = sent
    # Start: before the table was emptied, the first of its writes.
    assert span.began <= truncate.began
    # Every row written inside, and committed there: each statement on its own.
    assert insert.rows == world.entries == MemoryEntry.objects.count()
    assert all(s.autocommit for s in sent) and not commits
    assert max(committed_by(s, commits) for s in sent) <= span.ended
    # End: the table analysed (the planner's statistics for the figures after it).
    assert analyze.ended <= span.ended
    assert span_s(span) == pytest.approx(span.ended - span.began)


def test_assemble_context_times_each_call_alone_after_the_warming_ones(world, monkeypatch):
    calls = watch_calls(monkeypatch, context, "assemble_context")
    opened = time.time()
    with statements() as sent:
        spans = memory.context_spans(world, random.Random(6), samples=5, warm=3)
    assert len(calls) == 3 + 5
    warming, timed = calls[:3], calls[3:]
    assert max(c.returned for c in warming) <= spans[0].began  # warming calls untimed
    each_span_is_its_call(spans, timed, sent)
    assert all(c.kwargs["token_budget"] == 4000 for c in calls)
    assert all(c.kwargs["agent_id"] == f"executor-r{c.kwargs['scope']['run'][4:]}" for c in calls)
    least, most = bounds_ms(calls, 3, opened)
    figure = percentile_ms(spans, 95)
    assert percentile(least, 95) <= figure <= percentile(most, 95)


def test_write_times_each_write_entry_to_its_return_with_the_entry_committed(world, monkeypatch):
    calls = watch_calls(monkeypatch, services, "write_entry")
    commits = watch_commits(monkeypatch)
    opened = time.time()
    with statements() as sent:
        spans = memory.write_spans(world, random.Random(6), samples=5)
    each_span_is_its_call(spans, calls, sent)
    for span, call in zip(spans, calls, strict=True):
        entry = call.result
        assert (call.kwargs["type"], entry.run) == ("metrics", call.kwargs["run"])
        [insert] = [s for s in sent if s.sql.startswith("INSERT") and entry.key in s.params]
        # End: its row committed (visible to every reader) before the span ended.
        assert span.began <= insert.began and committed_by(insert, commits) <= span.ended
    assert MemoryEntry.objects.count() == ENTRIES + 5
    least, most = bounds_ms(calls, 0, opened)
    assert percentile(least, 95) <= percentile_ms(spans, 95) <= percentile(most, 95)
