"""The scheduling policies on plain data: FIFO order, first fit, and the starvation case."""

import pytest

from agentsys.policies import policy_named
from agentsys.scheduling import FifoFirstFit, HeadReservation, QueuedRequest


def q(*specs):
    return [QueuedRequest(f"r{i}", n) for i, n in enumerate(specs)]


def test_fifo_takes_requests_in_arrival_order_on_the_lowest_free_indices():
    placements = FifoFirstFit().select(q(1, 1, 1), free=[3, 1, 2], host_total=4)
    assert [(p.request_id, p.gpu_indices) for p in placements] == [
        ("r0", (1,)),
        ("r1", (2,)),
        ("r2", (3,)),
    ]


def test_fifo_first_fit_skips_what_does_not_fit():
    placements = FifoFirstFit().select(q(3, 1, 0), free=[0, 1], host_total=4)
    assert [p.request_id for p in placements] == ["r1", "r2"]


def _simulate(policy, rounds=20):
    """A 2-GPU host, both GPUs busy. A 2-GPU request is first in the queue, then a 1-GPU
    request arrives every round, and each small run lasts 2 rounds, so they always overlap.
    Returns the round the big request started, or None if it never did."""
    queue = [QueuedRequest("big", 2)]
    # id -> (rounds left, gpus): both GPUs busy when the big one arrives, ending staggered.
    running: dict[str, tuple[int, tuple[int, ...]]] = {"early0": (1, (0,)), "early1": (2, (1,))}
    for round_no in range(rounds):
        running = {r: (left - 1, gpus) for r, (left, gpus) in running.items() if left > 1}
        queue.append(QueuedRequest(f"small{round_no}", 1))
        busy = {gpu for _, gpus in running.values() for gpu in gpus}
        for placement in policy.select(queue, [i for i in (0, 1) if i not in busy], 2):
            if placement.request_id == "big":
                return round_no
            queue = [r for r in queue if r.id != placement.request_id]
            running[placement.request_id] = (2, placement.gpu_indices)
    return None


def test_fifo_starves_a_large_request_behind_small_ones():
    assert _simulate(FifoFirstFit()) is None


def test_head_reservation_runs_the_large_request_without_starving():
    started = _simulate(HeadReservation())
    assert started is not None and started <= 2


def test_reservation_lets_gpu_less_work_pass_and_ignores_requests_too_big_for_the_host():
    placements = HeadReservation().select(q(2, 1, 0), free=[0], host_total=2)
    assert [p.request_id for p in placements] == ["r2"]  # r1 waits behind r0; r2 needs no GPU
    placements = HeadReservation().select(q(8, 1), free=[0], host_total=2)
    assert [p.request_id for p in placements] == ["r1"]  # r0 can never run here


def test_unknown_policy_is_named_in_the_error():
    with pytest.raises(ValueError, match="unknown scheduling policy 'lottery'"):
        policy_named("lottery")
