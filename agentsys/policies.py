"""The scheduling policies by the name AGENTSYS_SCHEDULER_POLICY gives them."""

from __future__ import annotations

from agentsys.backfill import Backfill
from agentsys.scheduling import FifoFirstFit, HeadReservation, SchedulingPolicy

POLICIES: dict[str, SchedulingPolicy] = {
    p.name: p for p in (FifoFirstFit(), HeadReservation(), Backfill())
}
DEFAULT_POLICY = "backfill"


def policy_named(name: str) -> SchedulingPolicy:
    try:
        return POLICIES[name]
    except KeyError:
        raise ValueError(
            f"unknown scheduling policy {name!r}; choose one of {', '.join(POLICIES)}"
        ) from None
