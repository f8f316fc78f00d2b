"""Seed groups of a sweep's table: runs whose params are equal but for a seed form one group,
with each metric column's mean, spread and count over its runs (what W&B's grouping does).

Pure functions over the table's rows (scheduler_app.sweeps.table builds them, and reads the
groups of a page with `grouped_table`):

- The key of a run is its params, every one (objects and lists too, which the table shows no
  column for), less those named as a seed (SEED_KEYS, case-insensitive), and less nulls (a
  null and a missing param look alike in the table); and its command less its seed
  arguments (`--seed 1`, `--seed=1`, `SEED=1`): runs of two scripts never group. Numbers
  compare as numbers (1 is 1.0), a boolean is not a number. Runs with equal params and no
  seed at all (reruns) group too.
- The statistics of a metric column count only the group's runs that are done (exit code 0):
  a running run's value is where it has got to, a failed one's where it broke, and either
  would drag the mean. `n` is how many done runs had a finite value, `count` the group's
  runs, so a cell says n=2/3; `bad` counts done runs whose value is NaN or infinite (a
  diverged seed is said, not averaged away). `std` is the sample standard deviation (n-1),
  None for fewer than two values.
- Groups sort by their mean on a metric column (numbers, ascending or descending, then the
  groups with no mean); on any other column, and for ties, by their best-placed run in the
  table's own order (which sorted the runs by that column).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import statistics
from dataclasses import dataclass, field

from agentsys.types import EndState

# Names a seed is commonly given (PyTorch Lightning, HF Trainer, sklearn, JAX configs ...),
# compared folded and with `-` as `_`.
SEED_KEYS = frozenset(
    {"seed", "random_seed", "rng_seed", "random_state", "manual_seed", "global_seed", "data_seed"}
)
_SEED_NAMES = "|".join(sorted({k.replace("_", "[-_]") for k in SEED_KEYS}, key=len, reverse=True))
SEED_ARGUMENT = re.compile(rf"(?i)(?<![\w-])(?:--?)?(?:{_SEED_NAMES})(?:=|\s+)\S+")
COUNTED = EndState.DONE.value  # a run's status "done"
STATS = ("last", "min", "max")


def is_seed(name: str) -> bool:
    return name.casefold().replace("-", "_") in SEED_KEYS


@dataclass
class Group:
    id: str
    params: dict  # the params its runs share (no seed)
    rows: list[dict]  # its runs' table rows, in the table's order
    seeds: list  # each run's seed (None where it has none), as its rows
    metrics: dict[str, dict[str, dict]] = field(default_factory=dict)  # key -> stat -> stats
    statuses: dict[str, int] = field(default_factory=dict)

    @property
    def run_ids(self) -> list[str]:
        return [row["run_id"] for row in self.rows]


def group_rows(
    rows: list[dict], params: dict[str, dict], commands: dict[str, str] | None = None
) -> list[Group]:
    """The groups of `rows` (table rows, in the table's order), first placed first.
    `params`: each run's whole params by run id (a row's own hold its scalars only);
    `commands`: each run's command."""
    groups: dict[str, Group] = {}
    for row in rows:
        every = params.get(row["run_id"], row["params"])
        shared = {k: v for k, v in every.items() if not is_seed(k) and v is not None}
        key = _key(shared) + "\0" + without_seed((commands or {}).get(row["run_id"], ""))
        group = groups.get(key)
        if group is None:
            group_id = "group-" + hashlib.sha1(key.encode()).hexdigest()[:12]  # noqa: S324
            scalars = {k: v for k, v in row["params"].items() if not is_seed(k)}
            group = groups[key] = Group(group_id, scalars, [], [])
        group.rows.append(row)
        group.seeds.append(next((v for k, v in every.items() if is_seed(k)), None))
    for group in groups.values():
        group.metrics = group_metrics(group.rows)
        for row in group.rows:
            group.statuses[row["status"]] = group.statuses.get(row["status"], 0) + 1
    return list(groups.values())


def group_metrics(rows: list[dict]) -> dict[str, dict[str, dict]]:
    """Each metric key's last, min and max, as statistics over the done runs of `rows`."""
    keys = sorted({key for row in rows for key in row["metrics"]})
    done = [row for row in rows if row["status"] == COUNTED]
    return {
        key: {
            stat: stats([row["metrics"].get(key, {}).get(stat) for row in done], len(rows))
            for stat in STATS
        }
        for key in keys
    }


def stats(values: list, count: int) -> dict:
    """mean, std, min, max and n of the finite numbers in `values`; bad: NaN or ±inf."""
    numbers = [v for v in values if isinstance(v, int | float) and math.isfinite(v)]
    bad = sum(1 for v in values if isinstance(v, float) and not math.isfinite(v))
    out = {"mean": None, "std": None, "min": None, "max": None, "n": len(numbers)}
    if numbers:
        out.update(mean=statistics.fmean(numbers), min=min(numbers), max=max(numbers))
    if len(numbers) > 1:
        out["std"] = statistics.stdev(numbers)
    return out | {"bad": bad, "count": count}


def sort_groups(groups: list[Group], sort: str) -> list[Group]:
    """`groups` (first placed first) in the order of `sort`, a table column id."""
    column = sort.removeprefix("-")
    kind, _, rest = column.partition(".")
    if kind != "metric":
        return list(groups)
    key, _, stat = rest.rpartition(".")
    sign = -1 if sort.startswith("-") else 1

    def order(placed: tuple[int, Group]) -> tuple:
        mean = placed[1].metrics.get(key, {}).get(stat, {}).get("mean")
        return (mean is None, 0 if mean is None else sign * mean, placed[0])

    return [group for _, group in sorted(enumerate(groups), key=order)]


def without_seed(command: str) -> str:
    """The command as it would read for any seed."""
    return " ".join(SEED_ARGUMENT.sub("", command).split())


def _key(params: dict) -> str:
    return json.dumps(_canonical(params), sort_keys=True, separators=(",", ":"))


def _canonical(value):
    """A value whose JSON text is equal for equal params: 1.0 as 1, dicts by key."""
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value
