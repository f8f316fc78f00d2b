"""agentsys.fair_share: the queue in turns between people, by GPUs in use times what each asks
for in all, over their share."""

from __future__ import annotations

import pytest

from agentsys.fair_share import InvalidShares, fair_order, parse_shares
from agentsys.scheduling import QueuedRequest


def _line(person, count, gpus=1):
    return [QueuedRequest(f"{person}{n}", gpus) for n in range(count)]


def _ids(order):
    return [request.id for request in order]


def test_a_person_with_nothing_running_goes_before_a_big_sweep():
    heads = {"big": _line("big", 5), "small": _line("small", 1)}
    order = fair_order(heads, in_use={"big": 6}, shares={}, limit=10)
    assert _ids(order) == ["small0", "big0", "big1", "big2", "big3", "big4"]


def test_equal_shares_take_turns_and_a_share_weighs_gpus():
    heads = {"ada": _line("ada", 4), "bob": _line("bob", 4)}
    assert _ids(fair_order(heads, {}, {}, limit=4)) == ["ada0", "bob0", "ada1", "bob1"]
    # Ada's share is 3: she gets three GPUs for each of Bob's.
    order = _ids(fair_order(heads, {}, {"ada": 3}, limit=8))
    assert order[:7] == ["ada0", "bob0", "ada1", "ada2", "bob1", "ada3", "bob2"]


def test_big_requests_count_their_gpus_and_one_person_is_arrival_order():
    # Neither has a GPU in use: Bob, asking for 3 against Ada's 16, goes first.
    heads = {"ada": _line("ada", 2, gpus=8), "bob": _line("bob", 3)}
    assert _ids(fair_order(heads, {}, {}, limit=5)) == ["bob0", "ada0", "bob1", "bob2", "ada1"]
    only = {"": _line("x", 3)}
    assert _ids(fair_order(only, {"": 100}, {}, limit=2)) == ["x0", "x1"]


def test_whoever_asks_for_less_moves_faster_and_the_sweep_still_moves():
    heads = {"sweep": _line("sweep", 20), "few": _line("few", 20)}
    # 900 GPUs queued against 100: nine of every ten go to the smaller ask, none held back.
    order = _ids(fair_order(heads, {}, {}, limit=20, queued={"sweep": 900, "few": 100}))
    assert sum(name.startswith("few") for name in order[:10]) == 9
    assert "sweep0" in order[:2]
    # Asking as much, they split evenly, and a share weighs as before.
    even = _ids(fair_order(heads, {}, {}, limit=10, queued={"sweep": 100, "few": 100}))
    assert sum(name.startswith("few") for name in even) == 5
    shared = fair_order(heads, {}, {"sweep": 9}, limit=20, queued={"sweep": 900, "few": 100})
    assert sum(request.id.startswith("few") for request in shared) == 10


def test_gpus_held_count_in_the_ask_so_a_trickle_does_not_starve_a_sweep():
    # Bob holds 500 GPUs and keeps one run queued; Ada's 1,000-run sweep has none yet. Bob asks
    # for 501, Ada for 1,000: her part is a third, so ~250 of her runs go before his next.
    heads = {"bob": _line("bob", 1), "ada": _line("ada", 400)}
    order = _ids(fair_order(heads, {"bob": 500}, {}, limit=400, queued={"ada": 1000, "bob": 1}))
    assert order.index("bob0") in range(245, 256)
    # The same with the ask left out: what the heads hold is the ask.
    assert _ids(fair_order(heads, {"bob": 500}, {}, limit=3)) == ["ada0", "ada1", "ada2"]


def test_shares_read_from_the_setting():
    assert parse_shares("ada=3, bob=0.5,,") == {"ada": 3.0, "bob": 0.5}
    assert parse_shares("") == {}
    for bad, says in [
        ("ada", "expected person=share"),
        ("=2", "expected person=share"),
        ("ada=lots", "ada: the share must be a number, got 'lots'"),
        ("ada=0", "ada: the share must be above 0"),
        ("ada=nan", "ada: the share must be above 0"),
    ]:
        with pytest.raises(InvalidShares, match=says):
            parse_shares(bad)
