"""Why a queued request waits, in one sentence for the queue page and the overview.

The reasons are tried in order, each a small function that returns a sentence or None; the
counts are of the online hosts that have the labels the request requires (none has them:
"no online host has gpu_model~H100"). Reads nothing from the database: the caller passes the
host cards (scheduler_app.hosts.board) and the request's place in the line."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from agentsys.scheduling import describe_requires, host_meets
from scheduler_app.queue.claims import SLURM

NO_DAEMON = "no runagentd online"


class HostView(Protocol):
    """What a reason reads of a host (a scheduler_app.hosts.board.HostCard)."""

    name: str
    state: str  # online, silent, offline, dead
    alive: bool
    slurm: bool
    labels: dict  # agentsys.scheduling.host_meets
    total: int  # enabled GPUs
    free: int  # enabled, not booked, not held by others


@dataclass(frozen=True)
class Ask:
    """What a queued request asks for."""

    gpus: int
    ahead: int  # queued requests placed before it (goes_first)
    requires: dict[str, Any] = field(default_factory=dict)


def wait_reason(
    request, hosts: Sequence[HostView], *, ahead: int = 0, requires: dict | None = None
) -> str:
    """Why `request` (a queued ScheduleRequest) waits. `ahead`: how many queued requests
    before it go first (`goes_first`); `requires`: its demands beyond a GPU count (defaults to the
    request's own `requires`, where it has one)."""
    if getattr(request, "backend", "") == SLURM:
        return _slurm_reason(hosts)
    online = [host for host in hosts if host.alive]
    if not online:
        return NO_DAEMON
    if requires is None:
        requires = getattr(request, "requires", None) or {}
    if requires:
        online = [host for host in online if host_meets(host.labels, requires)]
        if not online:
            return f"no online host has {describe_requires(requires)}"
        hosts = [host for host in hosts if host_meets(host.labels, requires)]
    ask = Ask(gpus=request.gpu_required, ahead=ahead, requires=requires)
    for check in CHECKS:
        reason = check(ask, online, hosts)
        if reason:
            return reason
    return _place_in_line(ask)


def goes_first(request, hosts: Sequence[HostView], *, policy: str) -> bool:
    """Whether `request` is one a later request waits behind. Under `fifo` (first fit in
    arrival order) only one that fits some host's free GPUs now is placed before a later one;
    under `reserve` the oldest that can ever run holds the GPUs as they free."""
    if not request.gpu_required or getattr(request, "backend", "") == SLURM:
        return False
    requires = getattr(request, "requires", None) or {}
    online = [host for host in hosts if host.alive and host_meets(host.labels, requires)]
    if policy == "reserve":
        return request.gpu_required <= max((host.total for host in online), default=0)
    return request.gpu_required <= max((host.free for host in online), default=0)


def _slurm_reason(hosts: Sequence[HostView]) -> str:
    """A SLURM request waits for a runagentd that submits to SLURM; once submitted, its run
    shows SLURM's own reason (the queue page's SLURM rows)."""
    if any(host.alive and host.slurm for host in hosts):
        return "waits to be submitted to SLURM"
    return "no runagentd that submits to SLURM is online"


def _too_big(ask: Ask, online: Sequence[HostView], hosts: Sequence[HostView]) -> str | None:
    """No online host has that many GPUs at all (the queue refuses these at submission; a
    host that went down since can leave one here)."""
    largest = max(host.total for host in online)
    if ask.gpus <= largest:
        return None
    reason = f"no host has {_gpus(ask.gpus)}; largest has {largest}"
    down = [h for h in hosts if not h.alive and h.total >= ask.gpus]
    for host in sorted(down, key=lambda h: h.name):
        reason += f"; {host.name} has {host.total} but is {host.state}"
    return reason


def _none_free(ask: Ask, online: Sequence[HostView], hosts: Sequence[HostView]) -> str | None:
    if ask.gpus == 0 or any(host.free >= ask.gpus for host in online):
        return None
    most = max(host.free for host in online)
    each = ", ".join(f"{host.name}: {host.free} free of {host.total}" for host in online)
    wanted = f"{ask.gpus} free {_plural('GPU', ask.gpus)}"
    return f"no host with {wanted}; largest has {most} free ({each})"


CHECKS: tuple[Callable[[Ask, Sequence[HostView], Sequence[HostView]], str | None], ...] = (
    _too_big,
    _none_free,
)


def _place_in_line(ask: Ask) -> str:
    if ask.gpus == 0:
        return "needs no GPU: next in line"
    if ask.ahead == 0:
        return "next in line"
    return f"behind {ask.ahead} earlier {_plural('run', ask.ahead)}"


def _gpus(count: int) -> str:
    return f"{count} {_plural('GPU', count)}"


def _plural(word: str, count: int) -> str:
    return word if count == 1 else f"{word}s"
