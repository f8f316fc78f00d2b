"""Writes of a run's shipped log (RunLogChunk): what the executor's LogShipper
(agentsys.log_shipping) stores through its memory port, one transaction per chunk.

A chunk is stored only at the run's current `log_shipped_bytes`, by a conditional UPDATE of
the run's row that moves it on in the same transaction: the chunks stay contiguous whoever
writes, a write repeated after a lost reply stores nothing, and the reply (the database's
offset) tells the shipper where to go on from."""

from __future__ import annotations

from django.db import transaction

from scheduler_app.models import Run, RunLogChunk


def log_position(*, agent_id: str) -> tuple[str, int, bool] | None:
    """(run id, bytes shipped, capped) of the run executor `agent_id` runs; None when it runs
    none (an executor started without a Run row)."""
    return (
        Run.objects.filter(agent_id=agent_id)
        .order_by("-created_at")
        .values_list("pk", "log_shipped_bytes", "log_capped")
        .first()
    )


@transaction.atomic
def append_log(*, run_id: str, offset: int, data: bytes, capped: bool = False) -> tuple[int, bool]:
    """Store `data` as bytes [offset, offset + len) of the run's log when `offset` is where the
    stored log ends and it is not capped; `capped` marks this chunk the last. Returns the
    stored log's (end, capped) after, whether or not this write was stored."""
    end = offset + len(data)
    moved = Run.objects.filter(pk=run_id, log_shipped_bytes=offset, log_capped=False).update(
        log_shipped_bytes=end, log_capped=capped
    )
    if moved and data:
        RunLogChunk.objects.create(run_id=run_id, offset=offset, data=bytes(data))
        return end, capped
    row = Run.objects.filter(pk=run_id).values_list("log_shipped_bytes", "log_capped").first()
    if row is None:
        raise LookupError(f"no run {run_id!r}")
    return row
