"""The rows a script appends to its run directory's agent_metrics.jsonl (one JSON object a
line, W&B-style: {"_step": 10, "loss": 1.2}): the source AgentSys had first, and the one a
script that imports nothing of it can still write by hand."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentsys.metric_sources.base import Row, Watched
from agentsys.metrics import MetricsTail, PendingRows


class JsonlSource:
    name = "jsonl"

    def __init__(self, path: Path):
        self.tail = MetricsTail(path)
        self.problems: list[str] = []
        self._pending: PendingRows | None = None
        self._skipped_said = 0

    def peek(self) -> list[Row]:
        self._pending = self.tail.peek()
        if not self._pending.rows:  # nothing to store: past blank or malformed lines now
            self.tail.advance_to(self._pending.end, self._pending.inode)
        if self.tail.skipped and not self._skipped_said:
            self._skipped_said = self.tail.skipped
            self.problems.append(
                f"{self.tail.path.name}: a line that is not a JSON object was skipped "
                "(and any more like it)"
            )
        return self._pending.rows

    def advance(self, count: int) -> None:
        pending = self._pending
        if pending is None:
            return
        if count >= len(pending.rows):
            self.tail.advance_to(pending.end, pending.inode)  # past malformed lines too
        elif count > 0:
            self.tail.advance_to(pending.ends[count - 1], pending.inode)
        self._pending = None

    def position(self) -> dict[str, Any]:
        offset, inode = self.tail.position()
        return {"offset": offset, "inode": inode}

    def resume(self, position: dict[str, Any]) -> None:
        offset, inode = position.get("offset", 0), position.get("inode")
        if isinstance(offset, int) and (inode is None or isinstance(inode, int)):
            self.tail.resume_at(offset, inode)

    def params(self) -> dict[str, Any]:
        return {}

    def watched(self) -> list[Watched]:
        path = self.tail.path
        return [Watched(path.parent, names=frozenset({path.name}))]
