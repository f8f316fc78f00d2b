"""What every metric source is: a reader of one kind of record a run leaves behind (its
agent_metrics.jsonl, TensorBoard event files, its printed lines, an MLflow or W&B offline
store), read incrementally while the run goes and once more at its end.

The executor's watchdog asks each source for what is new (`peek`), stores those rows in the
run's series, and only then moves the source past them (`advance`), so a store that fails or
is cut short by a stop leaves the rows for the next read, and none is stored twice. It then
saves `position()` beside the run (metrics.pos) so a re-adopted run resumes there.

A row is a dict like the ones a script appends to agent_metrics.jsonl: numeric values by
metric name, with `_step` (an int) and `_timestamp` (seconds since the epoch, float) when the
source knows them. A source never raises on bad data: the run's files are written by user
code. What it cannot read it says once, in `problems` (the executor drains the list and shows
each line on the run's page), and goes on with the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

Row = dict[str, Any]


@dataclass(frozen=True)
class Watched:
    """A place a source reads, so the executor can look when it changes rather than on a timer
    (agentsys.metric_sources.changes). `names`: only these entries of the folder matter (None:
    all); `recursive`: its subfolders too, made later included, but none named in `skip`."""

    path: Path
    names: frozenset[str] | None = None
    recursive: bool = False
    skip: frozenset[str] = frozenset()


class MetricSource(Protocol):
    name: str  # "jsonl", "tensorboard", "stdout", "mlflow", "wandb": shown on the run page
    problems: list[str]  # new problems, each said once; the executor empties the list

    def peek(self) -> list[Row]:
        """The rows read and not yet advanced past, oldest first, reading what is new since the
        last call. Calling it again without `advance` returns the same rows first."""
        ...

    def advance(self, count: int) -> None:
        """The first `count` rows of the last `peek` are stored: never return them again."""
        ...

    def position(self) -> dict[str, Any]:
        """Where a re-adopted run's source resumes (JSON-able), with only stored rows before it."""
        ...

    def resume(self, position: dict[str, Any]) -> None:
        """Start from a `position()` saved by an earlier executor of the same run."""
        ...

    def params(self) -> dict[str, Any]:
        """Hyperparameters the source found (MLflow/W&B params, TensorBoard hparams); {} if none."""
        ...

    def watched(self) -> list[Watched]:
        """Where the source reads: a change there is worth a look at once."""
        ...
