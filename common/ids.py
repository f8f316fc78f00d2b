"""Creating rows whose short random ids can collide.

Agent ids are `{role}-{uuid8}` and request ids `sched-{uuid8}`: 32 random bits,
so a clash is likely somewhere past ~10^5 rows. Creation retries with a fresh id instead of
failing the spawn."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from django.db import IntegrityError, models, transaction

ATTEMPTS = 8


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
