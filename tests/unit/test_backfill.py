"""agentsys.backfill: the blocked head's reservation and what may start ahead of it."""

from __future__ import annotations

import pytest

from agentsys.backfill import Backfill, Busy, ClaimContext, HostState, clock, reserve
from agentsys.scheduling import QueuedRequest
from agentsys.stop_rules import time_limit

NOW = 1_800_000_000.0


def _claim(queue, free, hosts, *, host_id=1):
    """Backfill.select on host `host_id`, which has GPU indices `free` free."""
    context = ClaimContext(host_id, NOW, lambda: hosts)
    total = next(h.total for h in hosts if h.id == host_id)
    return Backfill().select(queue, free, total, context)


def _req(name, gpus, limit=None, requires=None):
    return QueuedRequest(name, gpus, requires or {}, limit)


def test_a_run_that_ends_before_the_reservation_starts_ahead_one_that_does_not_waits():
    host = HostState(1, "gpu-a", total=2, free=1, busy=(Busy(1, NOW + 600),))
    queue = [
        _req("head", 2),
        _req("long", 1, limit=3600),
        _req("unknown", 1),
        _req("short", 1, limit=300),
    ]
    placements = _claim(queue, [1], [host])
    assert [(p.request_id, p.gpu_indices) for p in placements] == [("short", (1,))]
    assert placements[0].note == f"backfilled: ends before gpu-a frees 2 GPUs at {clock(NOW + 600)}"


def test_only_the_gpus_the_head_will_not_need_go_to_runs_of_unknown_length():
    # 4 GPUs: 1 free, 2 free at +600, 1 held with no known end. The 2-GPU head starts at +600
    # on 2 of the 3 then free: one is spare, and one run of unknown length may have it.
    host = HostState(1, "gpu-a", total=4, free=1, busy=(Busy(2, NOW + 600), Busy(1, None)))
    unknown, known = reserve(_req("head", 4), [host], NOW), reserve(_req("head", 3), [host], NOW)
    assert (unknown.at, unknown.spare) == (None, 0)  # 4 need the one held with no known end
    assert (known.at, known.spare) == (NOW + 600, 0)

    queue = [_req("head", 2), _req("a", 1), _req("b", 1)]
    host = HostState(1, "gpu-a", total=4, free=1, busy=(Busy(2, NOW + 600), Busy(1, None)))
    placements = _claim(queue, [3], [host])
    assert [p.request_id for p in placements] == ["a"]
    assert placements[0].note == "backfilled: on GPUs gpu-a can spare"


def test_a_host_freed_only_by_runs_without_a_time_limit_is_held_for_the_head():
    host = HostState(1, "gpu-a", total=2, free=1, busy=(Busy(1, None),))
    assert _claim([_req("head", 2), _req("short", 1, limit=1)], [0], [host]) == []


def test_the_reservation_goes_to_the_host_that_frees_first_and_other_hosts_start_freely():
    slow = HostState(1, "gpu-a", total=2, free=1, busy=(Busy(1, NOW + 7200),))
    fast = HostState(2, "gpu-b", total=2, free=1, busy=(Busy(1, NOW + 60),))
    queue = [_req("head", 2), _req("small", 1)]
    assert reserve(queue[0], [slow, fast], NOW).host_name == "gpu-b"
    # On gpu-a the small run cannot delay the head: it starts, with no note.
    placed = _claim(queue, [1], [slow, fast], host_id=1)
    assert [(p.request_id, p.note) for p in placed] == [("small", "")]
    # On gpu-b it would: it waits.
    assert _claim(queue, [1], [slow, fast], host_id=2) == []


def test_a_known_time_beats_an_unknown_one_and_labels_count():
    unknown = HostState(1, "gpu-a", total=8, free=7, busy=(Busy(1, None),))
    known = HostState(2, "gpu-b", total=8, free=0, busy=(Busy(8, NOW + 9000),))
    h100 = HostState(3, "gpu-c", total=8, free=0, labels={"gpu_model": "H100"})
    assert reserve(_req("head", 8), [unknown, known, h100], NOW).host_name == "gpu-b"
    wants_h100 = _req("head", 8, requires={"gpu_model": "h100"})
    assert reserve(wants_h100, [unknown, known, h100], NOW).host_name == "gpu-c"
    assert reserve(_req("huge", 16), [unknown, known], NOW) is None


def test_a_request_that_fits_another_host_now_holds_nothing_here():
    here = HostState(1, "gpu-a", total=2, free=1, busy=(Busy(1, None),))
    there = HostState(2, "gpu-b", total=2, free=2)
    placed = _claim([_req("two", 2), _req("one", 1)], [0], [here, there])
    assert [p.request_id for p in placed] == ["one"]


def test_runs_placed_by_the_same_claim_count_on_its_host():
    # The first request takes the free GPU for 10 minutes; the head then waits for it.
    host = HostState(1, "gpu-a", total=2, free=2)
    queue = [_req("first", 1, limit=600), _req("head", 2), _req("later", 1, limit=900)]
    placed = _claim(queue, [0, 1], [host])
    assert [p.request_id for p in placed] == ["first"]


def test_a_claim_whose_requests_fit_never_reads_the_cluster():
    def cluster():
        raise AssertionError("read the cluster")

    context = ClaimContext(1, NOW, cluster)
    placed = Backfill().select([_req("a", 1), _req("b", 0)], [0, 1], 2, context)
    assert [p.request_id for p in placed] == ["a", "b"]
    # Nor one on a full host: no younger request could start here, so no head is looked for.
    placed = Backfill().select([_req("a", 2), _req("b", 1), _req("c", 0)], [], 2, context)
    assert [p.request_id for p in placed] == ["c"]


@pytest.mark.parametrize(
    ("rules", "limit"),
    [
        ([{"wall_seconds": 600}, {"metric": "loss", "above": 2}, {"wall_seconds": 90.5}], 90.5),
        ([{"metric": "loss", "above": 2}], None),
        (None, None),
        ("bad", None),
        ([{"wall_seconds": True}, {"wall_seconds": -1}, {"wall_seconds": "9"}, 7], None),
    ],
)
def test_a_runs_time_limit_is_its_smallest_wall_seconds_rule(rules, limit):
    assert time_limit(rules) == limit
