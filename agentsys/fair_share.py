"""Fair share between people (Slurm's fair-share, weighed by what each person asks for): the
queue is taken in turns, the next request being the oldest of the person with the least load:
their GPUs in use times the GPUs they ask for in all (running and queued), over their share.

So each person's part of the GPUs goes as their share over their ask. A person with nothing
running goes first; two people asking as much, with equal shares, split evenly; and one
person's 10,000-run sweep holds neither another's single run nor their hundred runs behind
it: whoever asks for less moves faster, and the sweep gets every GPU once they are done.
Weighing the GPUs in use alone cannot give that: two people with more queued than there are
GPUs would each get half, however little one of them asked for (docs/scaling.md, "Fair share
at once"). Someone who holds GPUs and trickles in one run at a time asks for what they hold
too: beside 500 held and one queued, a 1,000-run sweep gets a third, not nothing. With one
person queued it is plain arrival order.

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
    queued: Mapping[str, int] | None = None,
) -> list[QueuedRequest]:
    """Up to `limit` requests from the accounts' oldest-first `heads`, in the order the queue
    takes them: each time, the next request of the account with the least load, its GPUs in
    use (counting those this order has handed it so far) times the GPUs it asks for in all
    (`in_use` plus `queued`, the GPUs of all its queued requests; by default those in
    `heads`), over its share. Ties: the account handed fewer requests so far, then the smaller
    ask over share (of two with nothing in use, the one asking for less), then the name.
    A request needing no GPU adds nothing to its account's load: it takes nothing from
    anyone."""
    if queued is None:
        queued = {account: _gpus(requests) for account, requests in heads.items()}
    asks = {
        account: 1 / _weight(in_use.get(account, 0) + queued.get(account, 0), shares, account)
        for account in heads
    }
    turn: list[tuple[float, int, float, str]] = []
    taken = {account: 0 for account in heads}
    for account, requests in heads.items():
        if requests:
            load = in_use.get(account, 0) * asks[account]
            heapq.heappush(turn, (load, 0, asks[account], account))
    order: list[QueuedRequest] = []
    while turn and len(order) < limit:
        _, position, _, account = heapq.heappop(turn)
        request = heads[account][position]
        order.append(request)
        taken[account] += request.gpu_required
        if position + 1 < len(heads[account]):
            load = (in_use.get(account, 0) + taken[account]) * asks[account]
            heapq.heappush(turn, (load, position + 1, asks[account], account))
    return order


def parts(asked: Mapping[str, int], shares: Mapping[str, float]) -> dict[str, float]:
    """Each account's part of the GPUs while all of them wait, what fair_order's turns come
    to: its share over what it asks for in all (`asked`: GPUs in use and queued), out of the
    sum of those."""
    weights = {account: _weight(gpus, shares, account) for account, gpus in asked.items()}
    total = sum(weights.values())
    return {account: weight / total for account, weight in weights.items()}


def _weight(asked: int, shares: Mapping[str, float], account: str) -> float:
    return shares.get(account, DEFAULT_SHARE) / max(1, asked)


def _gpus(requests: Sequence[QueuedRequest]) -> int:
    return sum(request.gpu_required for request in requests)


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
