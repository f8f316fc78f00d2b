"""Ledger figures (issue 38 §1): what recording spend adds to a model step and to a run's
end (ledger_write_p50_ms, ledger_write_run_end_p50_ms: inside the caller's transaction, as
the loop's saved state and the run's end write them; the *_committed_* figures with a commit
of their own), and GET /api/ledger?group_by=loop over
10^6 entries (ledger_by_loop_1e6_entries_ms), through the Django test client: the view,
the query and the JSON (it sums ledger_app.SpendDay, the per-day sums that triggers keep
beside the entries). The entries are written in one INSERT … SELECT generate_series: 1,000
loops, 60 days, one in ten a run's GPU time. `python bench/ledger.py write` measures
the writes alone. Each figure is read between the instants of a Write or a Get
(tests/integration/test_bench_ledger_points.py checks they are the ones named)."""

import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._report import percentile, report
from bench.harness import TOKEN, BenchSystem

ENTRIES = 1_000_000
LOOPS = 1_000


def step(key: str) -> dict:
    return {"key": key, "usd": 0.0012, "model": "bench", "provider": "bench"} | {
        "input_tokens": 1200,
        "output_tokens": 80,
        "cache_read_tokens": 4000,
    }


@dataclass(frozen=True)
class Write:
    """One timed ledger write's instants (time.time(), so that they compare with the calls a
    test watches: tests/integration/test_bench_ledger_points.py)."""

    began: float  # just before the caller's transaction opened
    written: float  # the ledger's call returned, its transaction still open
    committed: float  # that transaction committed


def in_transaction_ms(write: Write) -> float:
    return (write.written - write.began) * 1000


def committed_ms(write: Write) -> float:
    return (write.committed - write.began) * 1000


def write_figures(writes: dict[str, list[Write]]) -> dict[str, float]:
    """The four write figures, by name, from write_ms's writes."""
    return {
        "ledger_write_p50_ms": percentile([in_transaction_ms(w) for w in writes["step"]], 50),
        "ledger_write_run_end_p50_ms": percentile(
            [in_transaction_ms(w) for w in writes["end"]], 50
        ),
        "ledger_write_committed_p50_ms": percentile([committed_ms(w) for w in writes["step"]], 50),
        "ledger_write_run_end_committed_p50_ms": percentile(
            [committed_ms(w) for w in writes["end"]], 50
        ),
    }


def write_ms(samples: int = 300) -> dict[str, list[Write]]:
    """Per model step (record_llm_steps for a research loop's agent, which reads the loop's
    sweep and person) and per run end (record_run_gpu), each in a transaction of its own: up
    to the write's return is what the ledger adds inside the caller's transaction (the loop's
    saved state and the run's end commit anyway); up to the commit, what it costs with a
    commit of its own (its fsync included)."""
    from datetime import timedelta

    from django.db import transaction
    from django.utils import timezone

    from agents_app.models import Agent
    from ledger_app.services import record_llm_steps, record_run_gpu

    loop = Agent.objects.create(id="research-bench", role="research", cls_path="x", project="b")
    writes: dict[str, list[Write]] = {"step": [], "end": []}

    def timed(name: str, write) -> None:
        began = time.time()
        with transaction.atomic():
            write()
            written = time.time()
        writes[name].append(Write(began, written, time.time()))

    for i in range(samples):
        timed("step", lambda i=i: record_llm_steps(steps=[step(f"prt_b{i}")], agent_id=loop.pk))
        ended = timezone.now()
        timed(
            "end",
            lambda i=i, ended=ended: record_run_gpu(
                run_id=f"run-bench{i}",
                gpus=2,
                started=ended - timedelta(minutes=5),
                ended=ended,
                host="bench-host",
                loop_id=loop.pk,
            ),
        )
    return writes


def fill(count: int = ENTRIES) -> None:
    """`count` entries in one statement (the SpendDay trigger sums them in it); a VACUUM
    ANALYZE after, as autovacuum would do soon after such a write (without it the first
    reads pay for the hint bits)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO ledger_app_spendentry (
                key, kind, created_at, input_tokens, output_tokens, reasoning_tokens,
                cache_read_tokens, cache_write_tokens, usd, model, provider, gpu_seconds,
                gpus, wall_seconds, host, run_id, sweep_id, loop_id, agent_id,
                chat_session_id, chat_turn_id, user_id)
            SELECT 'bench:' || i,
                   CASE WHEN i %% 10 = 0 THEN 'gpu' ELSE 'llm' END,
                   now() - (i %% 86400 * 60) * interval '1 second',
                   CASE WHEN i %% 10 = 0 THEN 0 ELSE 1000 + i %% 500 END, 80, 0,
                   CASE WHEN i %% 10 = 0 THEN 0 ELSE 4000 END, 0,
                   CASE WHEN i %% 10 = 0 THEN 0 ELSE 0.0012 END, 'bench-model', 'bench',
                   CASE WHEN i %% 10 = 0 THEN 600 ELSE 0 END,
                   CASE WHEN i %% 10 = 0 THEN 2 ELSE 0 END, 0, 'bench-host', '', '',
                   'research-' || (i %% %s), 'research-' || (i %% %s), '', '', NULL
            FROM generate_series(1, %s) AS i
            """,
            [LOOPS, LOOPS, count],
        )
        cursor.execute("VACUUM ANALYZE ledger_app_spendentry, ledger_app_spendday")


@dataclass(frozen=True)
class Get:
    """One GET /api/ledger?group_by=loop, timed at the client (time.time())."""

    sent: float  # just before the client sent it
    answered: float  # its whole answer back: the view, the query and the JSON
    entries: int  # the entries its total counts


def get_ms(get: Get) -> float:
    return (get.answered - get.sent) * 1000


def by_loop(samples: int = 9, entries: int = ENTRIES) -> list[Get]:
    from django.test import Client

    client = Client(HTTP_HOST="localhost", HTTP_X_AUTH_TOKEN=TOKEN)
    gets = []
    for _ in range(samples):
        sent = time.time()
        answer = client.get("/api/ledger?group_by=loop")
        answered = time.time()
        assert answer.status_code == 200, answer.content[:300]
        gets.append(Get(sent, answered, answer.json()["total"]["entries"]))
        assert gets[-1].entries >= entries
    return gets


def main() -> None:
    BenchSystem()
    for name, value in write_figures(write_ms()).items():
        report(name, value, "ms")
    if sys.argv[1:] == ["write"]:
        return
    fill()
    report("ledger_by_loop_1e6_entries_ms", percentile([get_ms(g) for g in by_loop()], 50), "ms")


if __name__ == "__main__":
    main()
