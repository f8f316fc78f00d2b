"""agentsys.fair_share: the queue in turns between people, by GPUs in use over share."""

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
    heads = {"ada": _line("ada", 2, gpus=8), "bob": _line("bob", 3)}
    assert _ids(fair_order(heads, {}, {}, limit=5)) == ["ada0", "bob0", "bob1", "bob2", "ada1"]
    only = {"": _line("x", 3)}
    assert _ids(fair_order(only, {"": 100}, {}, limit=2)) == ["x0", "x1"]


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
