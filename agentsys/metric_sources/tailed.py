"""What the sources that tail several files share (TensorBoard, MLflow, W&B): rows read but
not yet stored, each with the file it came from and the offset just past it; a file's saved
offset moves only once its rows are stored; each problem said once."""

from __future__ import annotations

from typing import Any

from agentsys.metric_sources.base import Row


class TailedFiles:
    """A base for sources whose `_files` map a key to an object with `read_offset` (read up
    to), `stored_offset` (stored up to) and `pending` (its rows not yet stored)."""

    def __init__(self) -> None:
        self.problems: list[str] = []
        self._files: dict[str, Any] = {}
        self._pending: list[tuple[Row, str, int]] = []  # (row, file key, offset past it)
        self._said: set[str] = set()

    def advance(self, count: int) -> None:
        stored, self._pending = self._pending[:count], self._pending[count:]
        for _, key, end in stored:
            self._files[key].stored_offset = end
            self._files[key].pending -= 1

    def _saved_offset(self, tailed) -> int:
        """Where a resumed source starts this file: past its stored rows only."""
        return tailed.stored_offset if tailed.pending else tailed.read_offset

    def _say(self, problem: str) -> None:
        if problem not in self._said:
            self._said.add(problem)
            self.problems.append(problem)
