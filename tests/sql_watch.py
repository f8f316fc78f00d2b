"""What a test saw PostgreSQL sent and committed while a benchmark timed: each statement's
instants and rows, each commit, and the bounds a timed call's span must fall within (the
bench points tests, tests/integration/test_bench_{memory,history}_points.py)."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass

from django.db import connection, connections

from tests.call_watch import watch_calls


@dataclass(frozen=True)
class Statement:
    sql: str
    params: tuple
    began: float  # time.time() as it was sent
    ended: float  # ... as its answer came back
    rows: int  # rows it wrote or read (the cursor's rowcount)
    autocommit: bool  # no transaction open: it committed as it ended


@contextlib.contextmanager
def statements():
    """Every statement this thread's connection sends inside the block (COPY aside)."""
    sent: list[Statement] = []

    def record(execute, sql, params, many, call):
        began = time.time()
        try:
            return execute(sql, params, many, call)
        finally:
            ended, rows = time.time(), call["cursor"].rowcount
            alone = connection.get_autocommit() and not connection.in_atomic_block
            sent.append(Statement(sql.strip(), tuple(params or ()), began, ended, rows, alone))

    with connection.execute_wrapper(record):
        yield sent


def watch_commits(monkeypatch) -> list:
    """Each commit of a transaction (transaction.atomic's end)."""
    return watch_calls(monkeypatch, type(connections["default"]), "commit")


def committed_by(statement: Statement, commits: list) -> float:
    """When `statement`'s work became visible to every reader."""
    if statement.autocommit:
        return statement.ended
    return min(c.returned for c in commits if c.began >= statement.ended)


def bounds_ms(calls, timed_from: int, opened: float) -> tuple[list[float], list[float]]:
    """For each timed call (calls[timed_from:]): the least its span can be (the call alone)
    and the most (from the call before it returned, or `opened`, the bench called, to the
    next one begun, or now)."""
    least, most = [], []
    for i in range(timed_from, len(calls)):
        after = calls[i - 1].returned if i else opened
        before = calls[i + 1].began if i + 1 < len(calls) else time.time()
        least.append((calls[i].returned - calls[i].began) * 1000)
        most.append((before - after) * 1000)
    return least, most
