"""Why a queued request waits under `backfill` (agentsys.backfill), for the queue page: the
blocked head says where and when its GPUs are kept for it, and a request that would fit now
only where it could delay that says so. Other requests wait for the usual reasons
(scheduler_app.queue.wait_reasons)."""

from __future__ import annotations

from collections.abc import Sequence

from agentsys.backfill import HostState, Reservation, can_run, reserve
from agentsys.scheduling import QueuedRequest
from agentsys.stop_rules import time_limit
from scheduler_app.queue.claims import SLURM


def as_queued(request) -> QueuedRequest:
    """A ScheduleRequest as the policy reads it."""
    config = request.config if isinstance(request.config, dict) else {}
    return QueuedRequest(
        request.pk,
        request.gpu_required,
        request.requires if isinstance(request.requires, dict) else {},
        time_limit(config.get("stop_when")),
    )


class BackfillReasons:
    """Fed the queue in claim order; `reason(request, usual)` is what the row says, given the
    reason it would have under first fit."""

    def __init__(self, hosts: Sequence[HostState], now: float):
        self.hosts = list(hosts)
        self.now = now
        self.reservation: Reservation | None = None
        self.spare = 0

    def reason(self, request, usual: str) -> str:
        held = self._held(request)
        if held is None:
            return usual
        if held.startswith("kept for it"):  # the head: why it waits, and what is kept for it
            return f"{usual}; {held}"
        return held  # "next in line" would mislead: it waits on the head

    def _held(self, request) -> str | None:
        if not request.gpu_required or getattr(request, "backend", "") == SLURM:
            return None
        queued = as_queued(request)
        fits = [h for h in self.hosts if can_run(queued, h) and h.free >= queued.gpu_required]
        if self.reservation is None:
            if fits:
                return None
            self.reservation = reserve(queued, self.hosts, self.now)
            if self.reservation is None:
                return None  # it can run on no online host: the usual reason says why
            self.spare = self.reservation.spare
            return f"kept for it: {self.reservation.describe()}"
        held = self.reservation
        if not fits or any(h.id != held.host_id for h in fits):
            return None  # no GPUs free for it anywhere, or free on a host the head does not need
        limit = queued.time_limit
        if held.at is not None and limit is not None and self.now + limit <= held.at:
            return None  # it may start ahead of the head: the next claim starts it
        if queued.gpu_required <= self.spare:
            self.spare -= queued.gpu_required
            return None
        if held.at is None:
            why = "no run there has a time limit, so nothing may start before it"
        elif limit is None:
            why = "it has no time limit"
        else:
            why = "its time limit ends after that"
        return f"would delay the reservation ({held.describe()}); {why}"
