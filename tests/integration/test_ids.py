"""Short random ids can clash; creation then takes a fresh one instead of failing."""

import itertools

import pytest
from django.db import IntegrityError

from agents_app.models import Agent
from common.ids import create_with_unique_id, fresh_ids

pytestmark = pytest.mark.django_db


def test_a_clashing_id_is_replaced():
    Agent.objects.create(id="executor-00000000", role="executor", cls_path="x", project="p")
    ids = iter(["executor-00000000", "executor-00000001"])
    agent = create_with_unique_id(
        Agent, lambda: next(ids), role="executor", cls_path="x", project="p"
    )
    assert agent.id == "executor-00000001"


def test_other_integrity_errors_are_not_retried():
    counter = itertools.count()
    with pytest.raises(IntegrityError):
        create_with_unique_id(
            Agent, lambda: f"executor-{next(counter):08d}", role=None, cls_path="x", project="p"
        )
    assert next(counter) == 1  # tried once


def test_ids_for_a_batch_are_neither_taken_nor_twice():
    Agent.objects.create(id="executor-00000000", role="executor", cls_path="x", project="p")
    drawn = iter(["executor-00000000", "executor-00000002", "executor-00000002"])
    spare = itertools.count(3)

    def draw():
        return next(drawn, None) or f"executor-{next(spare):08d}"

    assert fresh_ids(Agent, [draw] * 3) == [
        "executor-00000003",  # the taken one, drawn again
        "executor-00000002",
        "executor-00000004",  # the same as the one before it, drawn again
    ]


@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_a_clash_is_replaced_and_the_connection_goes_on():
    """No transaction of its own there (two round trips fewer): the failed insert rolls back
    alone, and the next one, and the caller's next query, work."""
    from django.db import connection

    Agent.objects.create(id="executor-00000000", role="executor", cls_path="x", project="p")
    ids = iter(["executor-00000000", "executor-00000001"])
    assert not connection.in_atomic_block
    agent = create_with_unique_id(
        Agent, lambda: next(ids), role="executor", cls_path="x", project="p"
    )
    assert agent.id == "executor-00000001"
    assert set(Agent.objects.values_list("id", flat=True)) == {agent.id, "executor-00000000"}
