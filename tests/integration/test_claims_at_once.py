"""Hosts claiming at once (a run's end wakes every runagentd): one host's claim is held open
in a thread, mid-transaction, while another host claims beside it."""

import contextlib
import threading

import pytest
from django.db import connection, transaction

from agentsys.scheduling import FifoFirstFit
from scheduler_app.models import ScheduleRequest
from scheduler_app.queue import claims as queue
from tests.integration.test_scheduler_queue import host_with_gpus, submit

pytestmark = pytest.mark.django_db(transaction=True)


@contextlib.contextmanager
def claiming_in_a_thread(host_id: int):
    """Host `host_id`'s claim made and its transaction left open until the block ends;
    yields what it took."""
    took, claimed, finish, errors = [], threading.Event(), threading.Event(), []

    def claim():
        try:
            with transaction.atomic():
                took.extend(queue.claim(host_id=host_id, policy=FifoFirstFit()))
                claimed.set()
                finish.wait(30)
        except BaseException as error:  # surfaced below
            errors.append(error)
            claimed.set()
        finally:
            connection.close()

    thread = threading.Thread(target=claim)
    thread.start()
    try:
        assert claimed.wait(30), "the first claim did not return"
        assert not errors, errors
        yield took
    finally:
        finish.set()
        thread.join(30)
    assert not errors, errors


def test_a_host_whose_choice_another_is_taking_takes_the_next_requests_not_nothing():
    """Both read the same head and choose its first two: the second host's choice is locked
    by the first's claim. It came back empty (64 hosts claiming at once: 90 of every 110
    claims empty); now it reads the head again past what is locked and takes the next two."""
    first, second = host_with_gpus("gpu-a", 2), host_with_gpus("gpu-b", 2)
    requests = [submit(1) for _ in range(5)]
    with claiming_in_a_thread(first.pk) as by_first:
        by_second = queue.claim(host_id=second.pk, policy=FifoFirstFit())
        assert [c.id for c in by_first] == [r.id for r in requests[:2]]
        assert [c.id for c in by_second] == [r.id for r in requests[2:4]]
        assert sorted(c.gpu_indices[0] for c in by_second) == [0, 1]
    running = ScheduleRequest.objects.filter(status="running")
    assert {(r.id, r.host_id) for r in running} == {
        *((r.id, first.pk) for r in requests[:2]),
        *((r.id, second.pk) for r in requests[2:4]),
    }
    assert ScheduleRequest.objects.get(pk=requests[4].pk).status == "queued"


def test_a_quiet_claim_hides_nothing_from_a_host_claiming_beside_it():
    """A host with one free GPU takes the 1-GPU request behind a 2-GPU head it cannot run;
    a host with two free GPUs, claiming before that commits, still sees the head and takes
    it: only a claim that lost a choice locks what it reads."""
    small_host, big_host = host_with_gpus("gpu-small", 1), host_with_gpus("gpu-big", 2)
    head, behind = submit(2), submit(1)
    with claiming_in_a_thread(small_host.pk) as by_small:
        by_big = queue.claim(host_id=big_host.pk, policy=FifoFirstFit())
        assert [c.id for c in by_small] == [behind.id]
        assert [(c.id, sorted(c.gpu_indices)) for c in by_big] == [(head.id, [0, 1])]
