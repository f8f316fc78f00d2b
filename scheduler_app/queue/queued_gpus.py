"""Each account's queued GPUs, for the accounts whose queue is longer than a claim's window:
fair share weighs a person's turn by what they ask for in all (agentsys.fair_share).

Summing the whole queue costs ~20 ms at 10^5 queued requests, where a claim takes about one,
and 64 hosts each summing it would keep a core of PostgreSQL busy. The figure only weighs
turns between people, so one sum serves the cluster: it is kept in QueuedAsk, and a claim
sums again only when the last sum is REFRESH_SECONDS old, one claimer at a time (an
advisory lock; the others go on with the last sum). Each process looks at most every
REFRESH_SECONDS, in one statement that does nothing while the sum is fresh. A queue short
enough for the window is summed in the window itself, exactly (scheduler_app.queue.window)."""

from __future__ import annotations

import math
import time

REFRESH_SECONDS = 5.0
_LOCK_KEY = 0x5155_4555  # pg advisory lock key ("QUEU"): the one claimer summing now

# The refresh: nothing at all unless the newest sum is old and this transaction gets the lock.
_SUM_IF_OLD = """
    WITH due AS MATERIALIZED (
        SELECT pg_try_advisory_xact_lock(%(key)s) AS mine
        WHERE NOT EXISTS (SELECT 1 FROM scheduler_app_queuedask
                          WHERE summed_at > now() - make_interval(secs => %(every)s))
    ), queued AS MATERIALIZED (
        SELECT r.account, sum(r.gpu_required) AS gpus
        FROM scheduler_app_schedulerequest AS r, due
        WHERE due.mine AND r.status = 'queued' AND r.backend <> 'slurm'
        GROUP BY r.account
    ), gone AS (
        DELETE FROM scheduler_app_queuedask AS q USING due
        WHERE due.mine AND q.account NOT IN (SELECT account FROM queued)
    )
    INSERT INTO scheduler_app_queuedask (account, gpus, summed_at)
    SELECT account, gpus, now() FROM queued
    ON CONFLICT (account) DO UPDATE SET gpus = excluded.gpus, summed_at = excluded.summed_at
"""

_next_look = -math.inf  # this process's, by monotonic clock


def sum_if_old(cursor, *, every: float = REFRESH_SECONDS) -> None:
    """Sum the queue into QueuedAsk if the last sum is `every` seconds old and no other
    transaction is summing it; this process looks at most every REFRESH_SECONDS (`every` 0:
    look now, and sum whatever the last sum's age). In the caller's transaction."""
    global _next_look
    now = time.monotonic()
    if every and now < _next_look:
        return
    _next_look = now + REFRESH_SECONDS
    cursor.execute(_SUM_IF_OLD, {"key": _LOCK_KEY, "every": every}, prepare=bool(every))
