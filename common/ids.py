"""Creating rows whose short random ids can collide.

Agent ids are `{role}-{uuid8}` and request ids `sched-{uuid8}`: 32 random bits,
so a clash is likely somewhere past ~10^5 rows. Creation retries with a fresh id instead of
failing the spawn."""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Sequence
from typing import TypeVar

from django.db import IntegrityError, models, transaction

ATTEMPTS = 8
T = TypeVar("T")
# Set inside insert_with_drawn_ids: fresh_ids then skips its query, a clash being retried there.
_UNCHECKED = contextvars.ContextVar("agentsys_ids_unchecked", default=False)


def create_with_unique_id(
    model: type[models.Model], make_id: Callable[[], str], first_id: str | None = None, **fields
) -> models.Model:
    candidate = first_id or make_id()
    # In a caller's transaction, a savepoint: a clash leaves the outer work intact. Outside
    # one, the insert alone: a clash rolls back only itself, and the BEGIN and COMMIT of a
    # transaction of our own would be two round trips more per row (issue 25).
    in_transaction = transaction.get_connection(model.objects.db).in_atomic_block
    for _ in range(ATTEMPTS):
        try:
            if not in_transaction:
                return model.objects.create(pk=candidate, **fields)
            with transaction.atomic(using=model.objects.db):
                return model.objects.create(pk=candidate, **fields)
        except IntegrityError:
            if not model.objects.filter(pk=candidate).exists():
                raise  # some other constraint failed: not ours to retry
            candidate = make_id()
    raise IntegrityError(f"no free id for {model.__name__} after {ATTEMPTS} attempts")


def fresh_ids(model: type[models.Model], makers: Sequence[Callable[[], str]]) -> list[str]:
    """One new id per maker, for rows of `model` inserted together (bulk_create): none taken
    in the table, none twice. One query per round; a clash (rare) draws again."""
    ids = [make() for make in makers]
    if _UNCHECKED.get():
        return _distinct(ids, makers)
    for _ in range(ATTEMPTS):
        taken = set(model.objects.filter(pk__in=ids).values_list("pk", flat=True))
        seen: set[str] = set()
        clashed = False
        for i, candidate in enumerate(ids):
            if candidate in taken or candidate in seen:
                ids[i], clashed = makers[i](), True
            seen.add(ids[i])
        if not clashed:
            return ids
    raise IntegrityError(f"no free ids for {model.__name__} after {ATTEMPTS} attempts")


def _distinct(ids: list[str], makers: Sequence[Callable[[], str]]) -> list[str]:
    seen: set[str] = set()
    for i in range(len(ids)):
        while ids[i] in seen:
            ids[i] = makers[i]()
        seen.add(ids[i])
    return ids


def insert_with_drawn_ids(insert: Callable[[], T], *, using: str = "default") -> T:
    """`insert()` in a transaction (a savepoint inside the caller's) with fresh_ids' ids not
    checked against the tables: one SELECT a table fewer for a row made alone (POST /api/runs,
    issue 25). A drawn id that is taken (one in ~4 billion per id) fails the insert on its
    primary key; the transaction is then rolled back and `insert` runs again with new draws."""
    for _ in range(ATTEMPTS):
        unchecked = _UNCHECKED.set(True)
        try:
            with transaction.atomic(using=using):
                return insert()
        except IntegrityError as error:
            if not is_primary_key_clash(error):
                raise
        finally:
            _UNCHECKED.reset(unchecked)
    raise IntegrityError(f"no free ids after {ATTEMPTS} attempts")


def is_primary_key_clash(error: IntegrityError) -> bool:
    """Whether PostgreSQL refused the row for a primary key already taken."""
    diag = getattr(error.__cause__, "diag", None)
    sqlstate = getattr(error.__cause__, "sqlstate", None)
    return sqlstate == "23505" and (getattr(diag, "constraint_name", "") or "").endswith("_pkey")
