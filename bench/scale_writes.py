"""What one PostgreSQL takes from one writer (bench/scale_history.py's `writes` part; the
ceilings docs/scaling.md reasons from): events_per_s_one_writer, metric_points_per_s_one_writer
and memory_writes_per_s_one_writer, each from before the first write call to the last one's
return (tests/integration/test_bench_history_points.py checks they are)."""

from __future__ import annotations

from bench._report import report
from bench.spans import Span, per_s, spanned


def events_one_writer(count: int) -> Span:
    """`count` events recorded one by one (each its own statement, committed as it ends):
    from before the first call to the last one's return."""
    from events_app.events import AGENTS_STREAM, record_event

    def record() -> None:
        for i in range(count):
            record_event(stream=AGENTS_STREAM, kind="note", agent_id="executor-w", payload={"i": i})

    return spanned(record)[1]


def metric_rows(first_step: int, count: int) -> list[dict]:
    """`count` rows of a loss from `first_step` on, as an executor reads them."""
    return [{"_step": first_step + i, "loss": 1.0 / (1 + i)} for i in range(count)]


def points_one_writer(batches: int, rows: int = 1000) -> Span:
    """`batches` batches of `rows` metric rows of one run, each stored and committed as an
    executor stores what it read: from before the first call to the last one's return. The
    rows are made before the clock starts."""
    from scheduler_app.metrics.series import record_rows
    from scheduler_app.models import Run

    run = Run.objects.create(name="writes", command="python train.py", status="running")
    made = [metric_rows(batch * rows, rows) for batch in range(batches)]

    def store() -> None:
        for batch in made:
            record_rows(agent_id="executor-w", run_id=run.pk, rows=batch)

    return spanned(store)[1]


def memory_one_writer(count: int) -> Span:
    """`count` memory entries written one by one: before the first call to the last return."""
    from memory_app.services import write_entry

    def write() -> None:
        for i in range(count):
            write_entry(type="context", project="p", agent_id="executor-w", data={"i": i})

    return spanned(write)[1]


def write_figures() -> None:
    """What one PostgreSQL takes from one writer, one statement's worth at a time (the
    ceilings docs/scaling.md reasons from): events recorded one by one, metric rows stored in
    batches of 1,000 as an executor stores what it read, memory entries written one by one."""
    report("events_per_s_one_writer", per_s(2000, events_one_writer(2000)), "events/s")
    points = per_s(20_000, points_one_writer(20))
    report("metric_points_per_s_one_writer", points, "points/s")
    report("memory_writes_per_s_one_writer", per_s(1000, memory_one_writer(1000)), "writes/s")
