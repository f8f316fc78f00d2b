"""The claim's window in fair-share order (scheduler_app.queue.window) on rows a real
PostgreSQL holds: a person's turn is weighed by all they have queued, also when their queue is
longer than the window reads (scheduler_app.queue.queued_gpus: the whole queue summed every
few seconds, for the whole cluster)."""

from __future__ import annotations

import psycopg
import pytest
from django.contrib.auth import get_user_model
from django.db import connection, transaction

from agentsys.types import RequestStatus
from scheduler_app.models import QueuedAsk, Run, ScheduleRequest
from scheduler_app.queue import queued_gpus
from scheduler_app.queue_board import queued_in_turn
from scheduler_app.runs import launch as runs
from tests.integration.test_host_board import a_host

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def a_host_for_them():
    a_host("gpu-a", gpus=8)  # a run no host could hold is refused, not queued


def _queue(person, count, gpus=1):
    for n in range(count):
        made = runs.create_run(
            name=f"{person.username}-{n}",
            command="python t.py",
            gpu_required=gpus,
            created_by=person,
        )
        runs.start_run(run_id=made.pk)


def _names(requests):
    names = dict(Run.objects.values_list("agent_id", "name"))
    return [names[request.agent_id] for request in requests]


def _sum(every):
    connection.ensure_connection()
    with transaction.atomic(), psycopg.Cursor(connection.connection) as cursor:
        queued_gpus.sum_if_old(cursor, every=every)


def test_a_queue_longer_than_the_window_weighs_by_all_it_holds(client, admin_user):
    ada, bob = (get_user_model().objects.create_user(n) for n in ("ada", "bob"))
    _queue(ada, 40)
    _queue(bob, 5)
    # Before any sum a window of 4 knows four of each: plain turns.
    assert _names(queued_in_turn(4)) == ["ada-0", "bob-0", "ada-1", "bob-1"]
    _sum(every=0)
    assert dict(QueuedAsk.objects.values_list("account", "gpus")) == {"ada": 40, "bob": 5}
    # Summed, Ada's sweep asks for 40 against Bob's 5: Bob's go first.
    assert _names(queued_in_turn(4)) == ["bob-0", "ada-0", "bob-1", "bob-2"]
    # The queue page says each person's part: share over ask, 1/5 against 1/40.
    client.force_login(admin_user)
    page = client.get("/queue/").content.decode()
    assert '<bdi class="account">bob</bdi></strong> 89 % of the GPUs (holds 0, asks 5)' in page
    assert '<bdi class="account">ada</bdi></strong> 11 % of the GPUs (holds 0, asks 40)' in page
    assert page.index(">bob</bdi></strong> 89 %") < page.index(">ada</bdi></strong> 11 %")
    # While the sum is fresh, no claimer sums again, whatever was queued since.
    _queue(bob, 50, gpus=4)
    _sum(every=60)
    assert _names(queued_in_turn(4)) == ["bob-0", "ada-0", "bob-1", "bob-2"]
    # Summed again, Bob asks for 205 GPUs: Ada's 40 is the smaller ask.
    _sum(every=0)
    assert _names(queued_in_turn(4)) == ["ada-0", "bob-0", "ada-1", "ada-2"]
    # An account with nothing queued leaves the sum.
    ScheduleRequest.objects.filter(account="ada").update(status=RequestStatus.CANCELLED)
    _sum(every=0)
    assert set(QueuedAsk.objects.values_list("account", flat=True)) == {"bob"}
    # One person waiting: no turns to show.
    assert 'data-testid="fair-share"' not in client.get("/queue/").content.decode()


def test_a_queue_the_window_holds_whole_is_counted_there_not_from_a_sum():
    ada, bob = (get_user_model().objects.create_user(n) for n in ("ada", "bob"))
    QueuedAsk.objects.create(account="ada", gpus=1000, summed_at="2026-01-01T00:00Z")
    _queue(ada, 3)
    _queue(bob, 2, gpus=2)
    # Ada asks for 3 GPUs, Bob for 4 (an old sum says otherwise; the window has it all).
    assert _names(queued_in_turn(10)) == ["ada-0", "bob-0", "ada-1", "ada-2", "bob-1"]
