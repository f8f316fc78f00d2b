"""Scheduling policies: given the queue and one host's free GPUs, which
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


# -- why a queued request waits (the queue page) ------------------------------------------------


@dataclass(frozen=True)
class HostCapacity:
    name: str
    alive: bool
    total: int  # enabled GPUs
    free: int  # enabled, not allocated, not held by foreign processes


def waiting_reasons(
    queue: Sequence[QueuedRequest], hosts: Sequence[HostCapacity], policy_name: str
) -> dict[str, str]:
    """One line per queued request, in queue order, saying what it waits for. It replays the
    claim's rules over all hosts at once: first fit in arrival order; under `reserve` the
    first request that fits a host's GPUs but not its free ones holds that host."""
    live = [h for h in hosts if h.alive]
    free = {h.name: h.free for h in live}
    held_by: dict[str, str] = {}  # host -> the request reserving it (reserve policy)
    reasons = {}
    for request in queue:
        need = request.gpu_required
        if not live:
            down = ", ".join(sorted(h.name for h in hosts)) or "none registered"
            reasons[request.id] = f"No live host (runagentd down; hosts: {down})"
            continue
        if need == 0:
            reasons[request.id] = "Needs no GPU: the next claim starts it"
            continue
        fitting = [h for h in live if h.total >= need]
        if not fitting:
            largest = max(h.total for h in live)
            dead = [h.name for h in hosts if not h.alive and h.total >= need]
            reasons[request.id] = (
                f"Host down: only {', '.join(dead)} has {need} GPUs"
                if dead
                else f"Needs {need} GPUs; the largest live host has {largest}"
            )
            continue
        open_hosts = [h for h in fitting if held_by.get(h.name, request.id) == request.id]
        ready = [h for h in open_hosts if free[h.name] >= need]
        if ready:
            free[ready[0].name] -= need
            reasons[request.id] = f"{need} GPU(s) free on {ready[0].name}: the next claim starts it"
            continue
        if not open_hosts:
            heads = sorted({held_by[h.name] for h in fitting})
            reasons[request.id] = f"Behind the head reservation of {', '.join(heads)}"
            continue
        best = max(open_hosts, key=lambda h: free[h.name])
        reasons[request.id] = (
            f"Not enough free GPUs: needs {need}, {best.name} has {free[best.name]} free"
        )
        if policy_name == HeadReservation.name:
            for host in open_hosts:
                held_by[host.name] = request.id
    return reasons
