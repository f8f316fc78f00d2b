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


def _draws(*first: str, prefix: str):
    """A maker that gives `first`, then ids never seen."""
    drawn, spare = iter(first), itertools.count(100)
    return lambda *args: next(drawn, None) or f"{prefix}-{next(spare):08d}"


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("clashing", ["run", "agent", "request"])
def test_a_run_made_alone_whose_drawn_id_is_taken_is_made_again_with_another(monkeypatch, clashing):
    """POST /api/runs draws its three ids unchecked (three queries fewer): a taken one fails
    the insert, which is then redone whole with new ids; the row that held the id is kept."""
    from scheduler_app.models import Run, ScheduleRequest
    from scheduler_app.runs import batch as run_batch
    from scheduler_app.runs import launch as runs

    first = runs.create_run(name="first", command="true", auto_start=True)
    taken = {
        "run": first.id,
        "agent": first.agent_id,
        "request": ScheduleRequest.objects.get(agent_id=first.agent_id).id,
    }[clashing]
    makers = {"run": "new_run_id", "request": "new_request_id"}
    if clashing == "agent":
        monkeypatch.setattr("agents_app.services.new_agent_id", _draws(taken, prefix="executor"))
    else:
        monkeypatch.setattr(run_batch, makers[clashing], _draws(taken, prefix=clashing))

    second = runs.create_run(name="second", command="true", auto_start=True)

    assert taken not in {
        second.id,
        second.agent_id,
        ScheduleRequest.objects.get(agent_id=second.agent_id).id,
    }
    assert sorted(Run.objects.values_list("name", flat=True)) == ["first", "second"]
    assert Agent.objects.count() == ScheduleRequest.objects.count() == 2
    first.refresh_from_db()
    assert (first.name, first.status) == ("first", "queued")


@pytest.mark.django_db(transaction=True)
def test_a_run_refused_by_another_constraint_is_not_made_again(monkeypatch):
    from scheduler_app.models import Run
    from scheduler_app.runs import launch as runs

    calls = itertools.count()

    def no_such_sweep(**references):
        next(calls)
        if references["sweep_id"]:  # the foreign key, as if the sweep went meanwhile
            raise IntegrityError("insert violates foreign key constraint")

    monkeypatch.setattr(runs, "_check_references", no_such_sweep)
    with pytest.raises(IntegrityError):
        runs.create_run(name="orphan", command="true", sweep_id="sweep-gone")
    assert next(calls) == 1 and not Run.objects.exists()
