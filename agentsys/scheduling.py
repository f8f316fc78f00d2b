"""Scheduling policies: given the queue and one host's free GPUs, which
requests start now and on which GPU indices. Pure functions over plain data, so they are
tested without a database; scheduler_app applies their decisions under row locks.

- `fifo` (the default): first fit in arrival order. A request never waits while GPUs it
  fits on are free, which is what a researcher watching idle GPUs expects. A large request
  can starve behind a stream of small ones.
- `reserve`: the oldest request that can ever run on this host holds the GPUs as they free
  up; nothing younger starts on this host until it has run, except on GPUs it cannot use.
  No starvation, at the price of GPUs idling while the head waits for enough of them.
- `backfill` (agentsys.backfill): the blocked head keeps a reservation on the host expected
  to free its GPUs first; a later request starts ahead of it only where it cannot delay it.

agentsys.policies names them (AGENTSYS_SCHEDULER_POLICY).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class QueuedRequest:
    id: str
    gpu_required: int
    requires: dict = field(default_factory=dict)  # host labels it needs (see host_meets)
    time_limit: float | None = None  # seconds: its wall_seconds stop rule (agentsys.backfill)


@dataclass(frozen=True)
class Placement:
    request_id: str
    gpu_indices: tuple[int, ...]
    note: str = ""  # why it started ahead of an older request (agentsys.backfill)


class SchedulingPolicy(Protocol):
    name: str

    def select(
        self, queue: Sequence[QueuedRequest], free: Sequence[int], host_total: int, context=None
    ) -> list[Placement]: ...


def _take(free: list[int], count: int) -> tuple[int, ...]:
    taken = tuple(free[:count])
    del free[:count]
    return taken


class FifoFirstFit:
    name = "fifo"

    def select(self, queue, free, host_total, context=None):
        free = sorted(free)
        placements = []
        for request in queue:
            if request.gpu_required <= len(free):
                placements.append(Placement(request.id, _take(free, request.gpu_required)))
        return placements


class HeadReservation:
    name = "reserve"

    def select(self, queue, free, host_total, context=None):
        free = sorted(free)
        placements = []
        for request in queue:
            if request.gpu_required > host_total:
                continue  # can never run here; it does not hold this host's GPUs
            if request.gpu_required <= len(free):
                placements.append(Placement(request.id, _take(free, request.gpu_required)))
                continue
            # The head waits here: it keeps every free GPU, so only GPU-less work may pass.
            placements.extend(
                Placement(r.id, ()) for r in _after(queue, request) if r.gpu_required == 0
            )
            break
        return placements


def _after(queue, request):
    seen = False
    for item in queue:
        if seen:
            yield item
        seen = seen or item is request


# -- host labels and what a request requires of them --------------------------------------------
#
# A host's labels: what it says of itself (AGENTSYS_HOST_LABELS="nvlink=yes,zone=lab-2") over
# what its GPUs say (gpu_model: the GPUs' name, gpu_memory_gb: the smallest GPU's memory). A
# request's `requires` names some of them: a number is a minimum (gpu_memory_gb: 40 fits an
# 80 GB card), a string is found in the host's value whatever its case ("H100" fits
# "NVIDIA H100 80GB HBM3"), a boolean must be equal.

MAX_REQUIREMENTS = 16
MAX_LABEL_LENGTH = 63
MAX_VALUE_LENGTH = 200


class InvalidLabels(ValueError):
    """Labels or requirements that cannot be used (the message says which and why)."""


def host_meets(labels: dict, requires: dict) -> bool:
    return all(_value_meets(labels.get(key), wanted) for key, wanted in requires.items())


def _value_meets(have, wanted) -> bool:
    if have is None:
        return False
    if isinstance(wanted, bool) or isinstance(have, bool):
        return have is wanted or str(have).lower() == str(wanted).lower()
    if isinstance(wanted, int | float):
        return isinstance(have, int | float) and have >= wanted
    return str(wanted).casefold() in str(have).casefold()


def describe_requires(requires: dict) -> str:
    parts = []
    for key, wanted in sorted(requires.items()):
        if isinstance(wanted, bool):
            parts.append(f"{key}={str(wanted).lower()}")
        elif isinstance(wanted, int | float):
            parts.append(f"{key}≥{wanted:g}")
        else:
            parts.append(f"{key}~{wanted}")
    return ", ".join(parts) or "no requirement"


def validate_requires(value, *, what: str = "requires") -> dict:
    """A request's requirements as stored, or InvalidLabels naming what is wrong."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidLabels(f"{what} must be an object of label: value, got {type(value).__name__}")
    if len(value) > MAX_REQUIREMENTS:
        raise InvalidLabels(f"{what}: at most {MAX_REQUIREMENTS} labels, got {len(value)}")
    for key, wanted in value.items():
        _check_label(key, what)
        if isinstance(wanted, float) and not math.isfinite(wanted):
            raise InvalidLabels(f"{what}.{key}: a number must be finite")
        if not isinstance(wanted, bool | int | float | str):
            raise InvalidLabels(
                f"{what}.{key}: a string, a number or true/false, got {type(wanted).__name__}"
            )
        if isinstance(wanted, str) and not 0 < len(wanted) <= MAX_VALUE_LENGTH:
            raise InvalidLabels(f"{what}.{key}: 1 to {MAX_VALUE_LENGTH} characters")
    return dict(value)


def _check_label(key, what: str) -> None:
    if not isinstance(key, str) or not key or len(key) > MAX_LABEL_LENGTH:
        raise InvalidLabels(f"{what}: a label is 1 to {MAX_LABEL_LENGTH} characters, got {key!r}")
    if not all(ch.isalnum() or ch in "_.-" for ch in key):
        raise InvalidLabels(f"{what}: label {key!r} may hold letters, digits, _ . - only")


def parse_labels(text: str) -> dict:
    """AGENTSYS_HOST_LABELS: `name=value` pairs separated by commas; a value that reads as a
    number is one (gpu_memory_gb=80), true/false are booleans."""
    labels: dict = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, raw = part.partition("=")
        key, raw = key.strip(), raw.strip()
        if not sep or not raw:
            raise InvalidLabels(f"expected name=value, got {part!r}")
        _check_label(key, "AGENTSYS_HOST_LABELS")
        labels[key] = _label_value(raw)
    return labels


def _label_value(raw: str):
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    for kind in (int, float):
        try:
            number = kind(raw)
        except ValueError:
            continue
        if math.isfinite(number):
            return number
    return raw


def gpu_labels(gpus: Sequence[dict]) -> dict:
    """What a host's GPUs say of it: their model (when they all share one) and the smallest
    one's memory in whole GB (10^9 bytes)."""
    labels: dict = {}
    gpus = [g for g in gpus if g.get("source") != "declared"]  # AGENTSYS_GPUS: nothing known
    names = {str(g.get("name") or "") for g in gpus}
    if len(names) == 1 and (name := names.pop()):
        labels["gpu_model"] = name
    memory = [g.get("memory_total_mb") for g in gpus]
    if memory and all(isinstance(m, int) and m > 0 for m in memory):
        # In the GB cards are sold by (10^9 bytes), so that a run asking for 80 fits an "80GB"
        # H100: NVML says 81559 MiB, 79 GiB but 85 GB. A T4 sold as 16GB has 15360 MiB.
        labels["gpu_memory_gb"] = min(memory) * 2**20 // 10**9
    return labels


# How much of the queue a claim reads (scheduler_app.queue.claims; bench/scale.py simulates it).
FIRST_WINDOW = 64  # queued requests a claim reads first, oldest first...
CLAIM_WINDOW = 500  # ...and at most, when the first window leaves GPUs idle
WINDOW_PER_FREE_GPU = 4


def first_window(free_gpus: int) -> int:
    """How many requests a claim that lost some of its choices to another host reads again,
    locking them (scheduler_app.queue.claims): about as many as it might use, four a free
    GPU (at least 8, at most FIRST_WINDOW). The first requests of a longer read are the same
    ones in the same order, so a shorter read changes no choice: when it leaves GPUs idle
    the claim reads CLAIM_WINDOW, as after the first window."""
    if not free_gpus:
        return FIRST_WINDOW
    return min(FIRST_WINDOW, max(8, WINDOW_PER_FREE_GPU * free_gpus))
