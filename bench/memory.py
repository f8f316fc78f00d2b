"""Memory figures (issue 5): query, context assembly and write latency at 10^6 entries
spread over many projects, sessions, sweeps and runs; and context assembly at 10^4 and 10^5
entries against a re-implementation of the original one-JSON-file-per-entry store.

- populate_1e6_entries_s: the table emptied, filled (bench.memory_data, one statement) and
  analysed: from before the TRUNCATE to the ANALYZE done, each statement committed as it ends.
- assemble_context_p95_ms: memory_app.context.assemble_context for a run's executor (token
  budget 4,000), from just before the call to its return; after 10 untimed ones.
- write_p95_ms: memory_app.services.write_entry of a metrics row, from just before the call to
  its return (the entry committed, visible to every reader).

Each figure is read from Spans (time.time(), so that they compare with the calls a test
watches: tests/integration/test_bench_memory_points.py); bench/scale_history.py times the same
at 10^7 entries."""

import random
import sys
import tempfile
from datetime import timedelta
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._report import percentile, report
from bench.harness import BenchSystem
from bench.memory_data import World
from bench.spans import Span, percentile_ms, span_ms, span_s, spanned, timed_spans


def _timed(fn, samples: int) -> list[float]:
    return [span_ms(span) for span in timed_spans(fn, samples)]


def fresh_table(world: World) -> Span:
    """The memory table emptied and filled with `world`, each statement committed as it
    ends (autocommit): from before the TRUNCATE to the ANALYZE done."""
    from django.db import connection

    def fill() -> None:
        with connection.cursor() as cursor:
            cursor.execute("TRUNCATE memory_app_memoryentry")
            world.populate(cursor)

    return spanned(fill)[1]


def context_spans(world: World, rng: random.Random, samples: int, warm: int) -> list[Span]:
    """assemble_context for a run's executor picked by `rng`, `warm` times untimed (the
    cache), then `samples` times, each timed from just before the call to its return."""
    from memory_app.context import assemble_context

    def spans(count: int) -> list[Span]:
        agents = [world.run_agent(rng) for _ in range(count)]
        return [
            spanned(partial(assemble_context, agent_id=agent_id, scope=scope, token_budget=4000))[1]
            for agent_id, scope in agents
        ]

    spans(warm)
    return spans(samples)


def write_spans(world: World, rng: random.Random, samples: int) -> list[Span]:
    """write_entry of a metrics row for a run's executor picked by `rng`, each timed from
    just before the call to its return: the entry committed, visible to every reader."""
    from memory_app.services import write_entry

    agents = [world.run_agent(rng) for _ in range(samples)]
    metrics = partial(write_entry, type="metrics", role="executor", data={"loss": 1.0})
    return [spanned(partial(metrics, agent_id=agent_id, **scope))[1] for agent_id, scope in agents]


def _export_to_filestore(root: Path):
    from bench.filestore import FileStore
    from memory_app.models import MemoryEntry

    store = FileStore(root)
    for row in MemoryEntry.objects.order_by().iterator(chunk_size=5000):
        store.write(
            {
                "key": row.key,
                "type": row.type,
                "agent_id": row.agent_id,
                "target_id": row.target_id,
                "project": row.project,
                "session": row.session,
                "sweep": row.sweep,
                "run": row.run,
                "role": row.role,
                "tags": row.tags,
                "data": row.data,
                "active": row.active,
                "acked": row.acked_at is not None,
                "created_at": row.created_at.timestamp(),
            }
        )
    return store


def compare_with_filestore(size: int, db_samples: int = 100, file_samples: int = 10) -> None:
    from memory_app.context import assemble_context

    # One busy project that grows: the original's scans are per project.
    world = World(size, sessions_per_project=10**9)
    fresh_table(world)
    with tempfile.TemporaryDirectory(prefix="agentsys-filestore-") as root:
        store = _export_to_filestore(Path(root))
        rng = random.Random(size)
        agents = [world.run_agent(rng) for _ in range(db_samples)]
        for agent_id, scope in agents[:3]:  # the same workload gives the same text
            ours = assemble_context(agent_id=agent_id, scope=scope, token_budget=2000)
            theirs = store.assemble_context(agent_id=agent_id, scope=scope, token_budget=2000)
            if ours != theirs:
                raise RuntimeError(f"the two stores disagree for {agent_id}")
        picks = iter(agents)
        db = _timed(lambda: assemble_context(**_agent(next(picks)), token_budget=2000), db_samples)
        picks = iter(agents)
        files = _timed(
            lambda: store.assemble_context(**_agent(next(picks)), token_budget=2000),
            file_samples,
        )
    tag = f"{size:.0e}".replace("+0", "")
    report(f"assemble_context_db_p50_ms_{tag}", percentile(db, 50), "ms")
    report(f"assemble_context_filestore_p50_ms_{tag}", percentile(files, 50), "ms")
    report(f"filestore_vs_db_ratio_{tag}", percentile(files, 50) / percentile(db, 50), "x")


def _agent(pick):
    agent_id, scope = pick
    return {"agent_id": agent_id, "scope": scope}


def at_a_million(samples: int = 200) -> None:
    from django.utils import timezone

    from agentsys.memory import EntryQuery
    from memory_app import selectors

    world = World(1_000_000)
    report("populate_1e6_entries_s", span_s(fresh_table(world)), "s")
    rng = random.Random(6)
    now = timezone.now()

    def run_scope():
        return world.run_agent(rng)

    kinds = {
        "my_entries": lambda: selectors.own_entries(agent_id=run_scope()[0], limit=500),
        "inbox": lambda: selectors.inbox(agent_id=run_scope()[0]),
        "read_self": lambda: selectors.query_entries(EntryQuery(agent_id=run_scope()[0])),
        "run_types": lambda: selectors.query_entries(
            EntryQuery(run=run_scope()[1]["run"], types=("metrics", "alert", "result"))
        ),
        "sweep_type_not": lambda: selectors.query_entries(
            EntryQuery(sweep=run_scope()[1]["sweep"], type_not=("metrics",))
        ),
        "session_since_before": lambda: selectors.query_entries(
            EntryQuery(
                session=run_scope()[1]["session"],
                since=now - timedelta(days=6),
                before=now - timedelta(days=1),
            )
        ),
        "project_level_types": lambda: selectors.query_entries(
            EntryQuery(project=run_scope()[1]["project"], types=("context", "reflection", "alert"))
        ),
        "project_newest": lambda: selectors.query_entries(
            EntryQuery(project=run_scope()[1]["project"])
        ),
        "project_tags": lambda: selectors.query_entries(
            EntryQuery(project=run_scope()[1]["project"], tags=("lr", "reward"))
        ),
        "tags_only": lambda: selectors.query_entries(EntryQuery(tags=("arch",))),
        "target": lambda: selectors.query_entries(EntryQuery(target_id=run_scope()[0])),
        "memory_bank": lambda: selectors.memory_bank(project=run_scope()[1]["project"]),
        "newest_overall": lambda: selectors.query_entries(EntryQuery(limit=100)),
    }
    for name, fn in kinds.items():
        _timed(fn, 10)  # warm the cache
        report(f"query_p95_ms_{name}", percentile(_timed(fn, samples), 95), "ms")
    assembled = context_spans(world, rng, samples, warm=10)
    report("assemble_context_p95_ms", percentile_ms(assembled, 95), "ms")
    report("write_p95_ms", percentile_ms(write_spans(world, rng, samples), 95), "ms")


def main() -> None:
    system = BenchSystem()
    try:
        for size in (10_000, 100_000):
            compare_with_filestore(size)
        at_a_million()
    finally:
        system.close()


if __name__ == "__main__":
    main()
