"""Reading a run's log, wherever this process is: from `run.log` when it shares the disk of
the host that ran the run, else from what that host shipped to the database (RunLogChunk,
agentsys.log_shipping). The REST API, the run page and the chat's reports all read here.

This process shares the run's disk when the run ran on this process's own host (its
AGENTSYS_HOST_NAME, the name its runagentd registers) and the file is there; a run no host
took yet (or made by hand with a run_dir) is read from the file when there is one."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.db.models import Subquery, Value
from django.db.models.functions import Coalesce

from agentsys.run_dir import LOG_FILE
from scheduler_app.models import Run, RunLogChunk


@dataclass(frozen=True)
class LogSlice:
    offset: int
    data: bytes
    size: int  # of the whole log as served: the file's, or the bytes shipped
    capped: bool  # served from the database, whose copy stops at the cap
    host: str  # the host that ran it ("" when none did yet)

    @property
    def next_offset(self) -> int:
        return self.offset + len(self.data)


def host_of(run: Run) -> str:
    """The name of the host whose runagentd ran the run (its executor's host)."""
    agent = run.agent if run.agent_id else None
    host = agent.host if agent is not None and agent.host_id else None
    return host.name if host is not None else ""


def local_file(run: Run, host: str | None = None) -> Path | None:
    """run.log when this process can read it: the run ran here (or nowhere yet)."""
    if not run.run_dir:
        return None
    host = host_of(run) if host is None else host
    if host and host != settings.AGENTSYS.host_name:
        return None
    path = Path(run.run_dir) / LOG_FILE
    return path if path.is_file() else None


def read_slice(run: Run, offset: int, limit: int) -> LogSlice:
    """Bytes [offset, offset + limit) of the log, cut at its end."""
    host = host_of(run)
    path = local_file(run, host)
    if path is not None:
        try:
            with open(path, "rb") as handle:
                size = handle.seek(0, 2)
                start = min(offset, size)
                handle.seek(start)
                return LogSlice(start, handle.read(limit), size, False, host)
        except OSError:  # deleted between the look and the read: the database has it
            pass
    size, capped = run.log_shipped_bytes, run.log_capped
    start = min(offset, size)
    return LogSlice(
        start, stored_bytes(run.pk, start, min(start + limit, size)), size, capped, host
    )


def tail(run: Run, max_bytes: int) -> tuple[bytes, bool]:
    """The log's last `max_bytes` bytes, and whether they are not the whole log."""
    probe = read_slice(run, 2**62, 1)
    start = max(0, probe.size - max_bytes)
    return read_slice(run, start, max_bytes).data, start > 0


def tail_text(run: Run, max_bytes: int) -> str:
    return tail(run, max_bytes)[0].decode("utf-8", errors="replace")


def stored_bytes(run_id: str, start: int, end: int) -> bytes:
    """Bytes [start, end) of the shipped log, in one query: the chunk holding `start` and
    every later one before `end` (the index on (run, offset) finds both)."""
    if end <= start:
        return b""
    holding_start = (
        RunLogChunk.objects.filter(run_id=run_id, offset__lte=start)
        .order_by("-offset")
        .values("offset")[:1]
    )
    rows = list(
        RunLogChunk.objects.filter(
            run_id=run_id,
            offset__lt=end,
            offset__gte=Coalesce(Subquery(holding_start), Value(0)),
        )
        .order_by("offset")
        .values_list("offset", "data")
    )
    if not rows:
        return b""
    base = rows[0][0]
    joined = b"".join(bytes(data) for _, data in rows)
    return joined[start - base : end - base]
