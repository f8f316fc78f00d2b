"""Fair share between people (Slurm's fair-share in its simplest form): the queue is taken in
turns, the next request being the oldest of the person whose GPUs in use, over their share,
are fewest. One person's 10,000-run sweep then no longer holds everyone else's single run
behind it: a person with nothing running goes first, and two people with equal shares and
endless queues each get half the GPUs. With one person queued it is plain arrival order.

A request's person is its account (scheduler_app: the person who made the run or its sweep;
"" when a script or no person made it, which counts as one more person). Shares come from
AGENTSYS_QUEUE_SHARES ("ada=3,bob=1"); anyone not named has a share of 1.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence

from agentsys.scheduling import QueuedRequest

DEFAULT_SHARE = 1.0
MAX_SHARE = 1_000_000.0


def fair_order(
    heads: Mapping[str, Sequence[QueuedRequest]],
    in_use: Mapping[str, int],
    shares: Mapping[str, float],
    limit: int,
) -> list[QueuedRequest]:
    """Up to `limit` requests from the accounts' oldest-first `heads`, in the order the queue
    takes them: each time, the next request of the account with the fewest GPUs in use per
    share, counting those this order has handed it so far (ties: the account handed fewer
    requests so far, then the name). A request needing no GPU adds nothing to its account's
    load: it takes nothing from anyone."""
    turn: list[tuple[float, int, str]] = []
    taken = {account: 0 for account in heads}
    for account, requests in heads.items():
        if requests:
            heapq.heappush(turn, (_load(account, in_use, 0, shares), 0, account))
    order: list[QueuedRequest] = []
    while turn and len(order) < limit:
        _, position, account = heapq.heappop(turn)
        request = heads[account][position]
        order.append(request)
        taken[account] += request.gpu_required
        if position + 1 < len(heads[account]):
            load = _load(account, in_use, taken[account], shares)
            heapq.heappush(turn, (load, position + 1, account))
    return order


def _load(account: str, in_use: Mapping[str, int], taken: int, shares: Mapping[str, float]):
    return (in_use.get(account, 0) + taken) / shares.get(account, DEFAULT_SHARE)


class InvalidShares(ValueError):
    """AGENTSYS_QUEUE_SHARES that cannot be read (the message says which part and why)."""


def parse_shares(text: str) -> dict[str, float]:
    """AGENTSYS_QUEUE_SHARES: `person=share` pairs separated by commas, a share a number
    above 0 ("ada=3,bob=1")."""
    shares: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, raw = part.partition("=")
        name = name.strip()
        if not sep or not name:
            raise InvalidShares(f"expected person=share, got {part!r}")
        try:
            share = float(raw)
        except ValueError:
            raise InvalidShares(
                f"{name}: the share must be a number, got {raw.strip()!r}"
            ) from None
        if not math.isfinite(share) or not 0 < share <= MAX_SHARE:
            raise InvalidShares(f"{name}: the share must be above 0 and at most {MAX_SHARE:g}")
        shares[name] = share
    return shares
