"""bench/ledger.py's figures time what their names say (issue 40 §3), at a tiny size on the
real parts (the ledger's inserts and their SpendDay trigger on PostgreSQL, the API view
through the Django test client): a write is timed from just before its transaction opened
to the ledger's call returned (inside it) or to its commit returned (*_committed_*), and the
by-loop figure from the GET sent to its whole answer back, over the entries filled before."""

from __future__ import annotations

import pytest
from django.db import connections
from django.test import Client

from bench import ledger
from bench._report import percentile
from bench.harness import TOKEN
from ledger_app import selectors, services
from ledger_app.models import SpendEntry
from tests.call_watch import watch_calls

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
SAMPLES = 4
FILLED = 2_000


def _watch_writes(monkeypatch) -> tuple[list, list, list]:
    steps = watch_calls(monkeypatch, services, "record_llm_steps")
    ends = watch_calls(monkeypatch, services, "record_run_gpu")
    commits = watch_calls(monkeypatch, type(connections["default"]), "commit")
    return steps, ends, commits


def test_writes_run_from_the_transaction_opened_to_the_write_and_to_its_commit(monkeypatch):
    steps, ends, commits = _watch_writes(monkeypatch)
    writes = ledger.write_ms(samples=SAMPLES)
    assert len(writes["step"]) == len(steps) == len(writes["end"]) == len(ends) == SAMPLES
    assert len(commits) == 2 * SAMPLES  # one transaction a write, nothing else committed
    # The bench writes a step, then a run's end, in turn: each with its own commit.
    calls = [call for pair in zip(steps, ends, strict=True) for call in pair]
    timed = [write for pair in zip(writes["step"], writes["end"], strict=True) for write in pair]
    before = 0.0  # the previous write's commit returned
    for write, call, commit in zip(timed, calls, commits, strict=True):
        # Start: after the previous write was done, just before the ledger's call.
        assert before <= write.began <= call.began
        # The in-transaction end: the call returned, its transaction not yet committing.
        assert call.returned <= write.written <= commit.began
        # The committed end: that commit returned.
        assert commit.returned <= write.committed
        before = write.committed
    assert SpendEntry.objects.filter(kind="llm").count() == SAMPLES
    assert SpendEntry.objects.filter(kind="gpu").count() == SAMPLES
    _figures_are_read_between_those_instants(writes)


def _figures_are_read_between_those_instants(writes) -> None:
    def p50(name: str, end: str) -> float:
        return percentile([(getattr(w, end) - w.began) * 1000 for w in writes[name]], 50)

    assert ledger.write_figures(writes) == pytest.approx(
        {
            "ledger_write_p50_ms": p50("step", "written"),
            "ledger_write_run_end_p50_ms": p50("end", "written"),
            "ledger_write_committed_p50_ms": p50("step", "committed"),
            "ledger_write_run_end_committed_p50_ms": p50("end", "committed"),
        }
    )


def test_by_loop_runs_from_the_get_sent_to_its_whole_answer(agentsys_config, monkeypatch):
    agentsys_config(api_token=TOKEN)
    ledger.fill(count=FILLED)
    gets = watch_calls(monkeypatch, Client, "get")
    sums = watch_calls(monkeypatch, selectors, "grouped_with_total")
    timed = ledger.by_loop(samples=3, entries=FILLED)
    assert len(timed) == len(gets) == len(sums) == 3
    for got, get, summed in zip(timed, gets, sums, strict=True):
        # Over every entry filled: the answer's total counts them all.
        assert got.entries == FILLED
        # Start: just before the client sent it; end: its answer back, the view's query
        # (the sums by loop over SpendDay) and its JSON inside.
        assert got.sent <= get.began <= summed.began
        assert summed.returned <= get.returned <= got.answered
        assert get.result.status_code == 200
        assert ledger.get_ms(got) == pytest.approx((got.answered - got.sent) * 1000)
