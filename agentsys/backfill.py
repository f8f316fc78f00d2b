"""Backfill: the queue's head is never kept waiting by runs that came after it, and GPUs do
not idle behind it (Slurm's backfill in its simplest form, "EASY").

The first queued request that fits on no online host now (the blocked head) gets a
reservation: the host expected to have its GPUs free first, and when, from the time limits of
the runs on it. A run's time limit is its `{"wall_seconds": N}` stop rule, which its executor
enforces (agentsys.stop_rules), so the plan holds. A later request starts ahead of the head
only where it cannot delay that reservation: on any other host; on the reserved host, if its
own time limit ends it before the reservation's time, or if it takes only GPUs the head will
not need then. A run with no time limit never ends as far as the plan knows: it backfills only
on such spare GPUs, and a host whose GPUs it holds is reserved only when no host has a known
time (then nothing with GPUs starts there before the head: no starvation, as `reserve`).

Pure functions over plain data; scheduler_app.queue.claims reads the cluster (lazily: a claim
whose requests all fit never reads it) and applies the placements under row locks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from agentsys.scheduling import Placement, QueuedRequest, host_meets


@dataclass(frozen=True)
class Busy:
    """GPUs a running request (or another user's process) holds on a host."""

    gpus: int
    ends_at: float | None  # epoch seconds: its start plus its time limit; None: not known


@dataclass(frozen=True)
class HostState:
    """An online host as a claim sees it."""

    id: int
    name: str
    total: int  # enabled GPUs
    free: int  # enabled, booked by no request, held by no other process
    labels: dict = field(default_factory=dict)
    busy: tuple[Busy, ...] = ()


@dataclass(frozen=True)
class Reservation:
    """Where and when the blocked head is expected to start."""

    request_id: str
    host_id: int
    host_name: str
    gpus: int
    at: float | None  # None: only once runs with no time limit end
    spare: int  # GPUs of that host the head leaves free at `at`

    def describe(self) -> str:
        when = f"at {clock(self.at)}" if self.at is not None else "when its runs end"
        return f"{self.host_name} frees {self.gpus} GPU{'s' if self.gpus != 1 else ''} {when}"


def clock(epoch: float) -> str:
    """A reservation's time as a person reads it on the queue page, which is in UTC."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%H:%M UTC")


def free_at(host: HostState, gpus: int, now: float) -> float | None:
    """When `host` is expected to have `gpus` free: now, a running request's end, or None."""
    if host.free >= gpus:
        return now
    have = host.free
    for busy in sorted((b for b in host.busy if b.ends_at is not None), key=lambda b: b.ends_at):
        have += busy.gpus
        if have >= gpus:
            return max(now, busy.ends_at)
    return None


def free_by(host: HostState, when: float) -> int:
    """The GPUs of `host` free at `when`, if nothing new starts on it."""
    ended = sum(b.gpus for b in host.busy if b.ends_at is not None and b.ends_at <= when)
    return host.free + ended


def can_run(request: QueuedRequest, host: HostState) -> bool:
    return request.gpu_required <= host.total and host_meets(host.labels, request.requires)


def reserve(request: QueuedRequest, hosts: Sequence[HostState], now: float) -> Reservation | None:
    """The head's reservation: the host that frees its GPUs first (a known time before an
    unknown one, then the most GPUs free now, then the name); None if no online host can
    ever run it."""
    need = request.gpu_required
    candidates = [host for host in hosts if can_run(request, host)]
    if not candidates:
        return None

    def soonest(host: HostState):
        at = free_at(host, need, now)
        return (at is None, at or 0.0, -host.free, host.name)

    host = min(candidates, key=soonest)
    at = free_at(host, need, now)
    spare = free_by(host, at) - need if at is not None else 0
    return Reservation(request.id, host.id, host.name, need, at, max(0, spare))


@dataclass
class ClaimContext:
    """What a backfilling claim knows beyond its own host's free GPUs."""

    host_id: int
    now: float
    cluster: Callable[[], Sequence[HostState]]  # the online hosts, read when first needed
    _hosts: list[HostState] | None = None

    def hosts(self) -> list[HostState]:
        if self._hosts is None:
            self._hosts = list(self.cluster())
        return self._hosts


class Backfill:
    name = "backfill"

    def select(
        self,
        queue: Sequence[QueuedRequest],
        free: Sequence[int],
        host_total: int,
        context: ClaimContext | None = None,
    ) -> list[Placement]:
        free = sorted(free)
        placements: list[Placement] = []
        started: list[Busy] = []  # placed by this claim, on this host
        reservation: Reservation | None = None
        blocked: list[QueuedRequest] = []  # fit nowhere here, before any that fits here
        spare = 0
        for request in queue:
            need = request.gpu_required
            if need == 0:
                placements.append(Placement(request.id, ()))
                continue
            if need > len(free):
                if reservation is None and context is not None:
                    blocked.append(request)
                continue
            # Whether an older request is the blocked head matters only now that a younger
            # one could start here: the other hosts are read then, not on every claim.
            if reservation is None and blocked:
                reservation = _first_reservation(blocked, context, len(free), started)
                spare = reservation.spare if reservation else 0
                blocked.clear()
            note = ""
            if reservation is not None and context is not None:
                if reservation.host_id != context.host_id:
                    pass  # this host is not the one the head waits for
                elif _ends_before(request, context.now, reservation.at):
                    note = f"backfilled: ends before {reservation.describe()}"
                elif need <= spare:
                    spare -= need
                    note = f"backfilled: on GPUs {reservation.host_name} can spare"
                else:
                    continue  # it would delay the head: it waits too
            taken = tuple(free[:need])
            del free[:need]
            ends = context.now + request.time_limit if context and request.time_limit else None
            started.append(Busy(need, ends))
            placements.append(Placement(request.id, taken, note))
        return placements


def _first_reservation(
    blocked: list[QueuedRequest], context: ClaimContext, free_here: int, started: list[Busy]
) -> Reservation | None:
    """The reservation of the first of `blocked` (in the queue's order) that fits on no
    online host now but can run on one; None if none is such a head."""
    largest = _largest(context)
    for request in blocked:
        if request.gpu_required <= largest:
            reservation = _blocked(request, context, free_here, started)
            if reservation is not None:
                return reservation
    return None


def _largest(context: ClaimContext) -> int:
    return max((host.total for host in context.hosts()), default=0)


def _blocked(
    request: QueuedRequest, context: ClaimContext, free_here: int, started: list[Busy]
) -> Reservation | None:
    """The request's reservation if it fits on no online host now; None if it fits somewhere
    (that host's claim starts it) or can run nowhere."""
    hosts = [
        replace(host, free=free_here, busy=host.busy + tuple(started))
        if host.id == context.host_id
        else host
        for host in context.hosts()
    ]
    if any(can_run(request, host) and host.free >= request.gpu_required for host in hosts):
        return None
    return reserve(request, hosts, context.now)


def _ends_before(request: QueuedRequest, now: float, at: float | None) -> bool:
    return at is not None and request.time_limit is not None and now + request.time_limit <= at
