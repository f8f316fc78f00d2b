"""Scheduling policies (design doc §5.4): given the queue and one host's free GPUs, which
requests start now and on which GPU indices. Pure functions over plain data, so they are
tested without a database; scheduler_app applies their decisions under row locks.

- `fifo` (the default): first fit in arrival order. A request never waits while GPUs it
  fits on are free, which is what a researcher watching idle GPUs expects. A large request
  can starve behind a stream of small ones.
- `reserve`: the oldest request that can ever run on this host holds the GPUs as they free
  up; nothing younger starts on this host until it has run, except on GPUs it cannot use.
  No starvation, at the price of GPUs idling while the head waits for enough of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class QueuedRequest:
    id: str
    gpu_required: int


@dataclass(frozen=True)
class Placement:
    request_id: str
    gpu_indices: tuple[int, ...]


class SchedulingPolicy(Protocol):
    name: str

    def select(
        self, queue: Sequence[QueuedRequest], free: Sequence[int], host_total: int
    ) -> list[Placement]: ...


def _take(free: list[int], count: int) -> tuple[int, ...]:
    taken = tuple(free[:count])
    del free[:count]
    return taken


class FifoFirstFit:
    name = "fifo"

    def select(self, queue, free, host_total):
        free = sorted(free)
        placements = []
        for request in queue:
            if request.gpu_required <= len(free):
                placements.append(Placement(request.id, _take(free, request.gpu_required)))
        return placements


class HeadReservation:
    name = "reserve"

    def select(self, queue, free, host_total):
        free = sorted(free)
        placements = []
        for request in queue:
            if request.gpu_required > host_total:
                continue  # can never run here; it does not hold this host's GPUs
            if request.gpu_required <= len(free):
                placements.append(Placement(request.id, _take(free, request.gpu_required)))
                continue
            # The head waits here: it keeps every free GPU, so only GPU-less work may pass.
            placements.extend(
                Placement(r.id, ()) for r in _after(queue, request) if r.gpu_required == 0
            )
            break
        return placements


def _after(queue, request):
    seen = False
    for item in queue:
        if seen:
            yield item
        seen = seen or item is request


POLICIES: dict[str, SchedulingPolicy] = {p.name: p for p in (FifoFirstFit(), HeadReservation())}
DEFAULT_POLICY = "fifo"


def policy_named(name: str) -> SchedulingPolicy:
    try:
        return POLICIES[name]
    except KeyError:
        raise ValueError(
            f"unknown scheduling policy {name!r}; choose one of {', '.join(POLICIES)}"
        ) from None
