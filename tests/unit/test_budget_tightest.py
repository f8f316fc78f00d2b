"""Budget defaults (issue 38 §2): a loop's own budget, its chat session's default and its
person's default; the tightest applies, cap by cap, and saying where each came from."""

import pytest

from agentsys.research.budget import tightest


def test_each_cap_is_the_smallest_of_those_that_set_it_and_says_whose():
    merged, came_from = tightest(
        {
            "loop": {"llm_usd": 5, "gpu_hours": 1},
            "session": {"gpu_hours": 0.5, "wall_hours": 12},
            "person": {"llm_usd": 2, "gpu_hours": 3, "llm_tokens": 10_000},
        }
    )
    assert merged == {
        "llm_usd": 2.0,
        "gpu_hours": 0.5,
        "wall_hours": 12.0,
        "llm_tokens": 10_000.0,
        "on_cap": "hold_runs",
    }
    assert came_from == {
        "llm_usd": "person",
        "gpu_hours": "session",
        "wall_hours": "session",
        "llm_tokens": "person",
    }


def test_stop_runs_wins_if_any_says_so():
    merged, came_from = tightest(
        {"loop": {"gpu_hours": 1}, "person": {"llm_usd": 9, "on_cap": "stop_runs"}}
    )
    assert merged["on_cap"] == "stop_runs" and came_from["on_cap"] == "person"
    merged, came_from = tightest({"loop": {"gpu_hours": 1, "on_cap": "hold_runs"}})
    assert merged["on_cap"] == "hold_runs" and "on_cap" not in came_from


def test_a_tie_is_the_first_sources_and_a_zero_cap_counts():
    merged, came_from = tightest({"loop": {"gpu_hours": 1}, "session": {"gpu_hours": 1}})
    assert came_from == {"gpu_hours": "loop"}
    merged, came_from = tightest({"loop": {"gpu_hours": 1}, "person": {"gpu_hours": 0}})
    assert merged["gpu_hours"] == 0.0 and came_from == {"gpu_hours": "person"}


def test_no_budget_anywhere_is_none():
    assert tightest({"loop": None, "session": {}, "person": None}) == ({}, {})
    assert tightest({}) == ({}, {})


def test_a_bad_default_is_refused_not_merged():
    with pytest.raises(ValueError, match=r"person's budget gpu_hours must be a number >= 0"):
        tightest({"loop": {"llm_usd": 1}, "person": {"gpu_hours": -1}})
