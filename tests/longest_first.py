"""The suite's work units reach the workers longest first.

pytest-xdist hands out units (a module, or a group of modules: tests/conftest.py) in order of
how many tests each holds, so a module of one long test (test_external_database: 3 minutes)
started last and four workers waited on one. Taking the longest first (LPT) ends the workers
close together. How long each unit took is kept in tests/durations.json; a unit not in it
counts SECONDS_PER_UNKNOWN_TEST a test. Stale figures only change the order, never a result.

To measure them again: `AGENTSYS_TEST_DURATIONS_OUT=tests/durations.json make test`. That
also writes each unit's CPU seconds beside it (tests/durations.cpu.json): the worker's own and
its reaped children's (runagentd, daphne, a child pytest; not the shared PostgreSQL), and
under SESSION_UNIT the workers' session-wide servers. The suite is CPU-bound on two cores, so
that file, not the wall time, says what to make cheaper.
"""

from __future__ import annotations

import json
import os
import resource
from collections.abc import Callable
from pathlib import Path

import pytest

DURATIONS = Path(__file__).with_name("durations.json")
SECONDS_PER_UNKNOWN_TEST = 2.0
OUT_VARIABLE = "AGENTSYS_TEST_DURATIONS_OUT"


def order_longest_first(
    items: list, group_of: Callable[[object], str], known: dict[str, float]
) -> None:
    """Reorder `items` in place: whole units, longest first by their `known` seconds;
    inside a unit, as collected."""
    units: dict[str, list] = {}
    for item in items:
        units.setdefault(group_of(item), []).append(item)

    def estimate(unit: str) -> float:
        return known.get(unit, SECONDS_PER_UNKNOWN_TEST * len(units[unit]))

    items[:] = [item for unit in sorted(units, key=estimate, reverse=True) for item in units[unit]]


class LongestFirst:
    """On an xdist worker: the collected tests reordered, after every other plugin's order
    (pytest-django's sorts by database use), in the order the units are to go out."""

    def __init__(self, group_of: Callable[[object], str]):
        self.group_of = group_of

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list) -> None:
        order_longest_first(items, self.group_of, read_durations(DURATIONS))


def read_durations(path: Path) -> dict[str, float]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: float(v) for k, v in data.items() if isinstance(v, int | float)}


class DurationRecorder:
    """On the xdist controller: each unit's seconds (setup, call and teardown of its tests),
    written at the end of the run to the file $AGENTSYS_TEST_DURATIONS_OUT names, over what
    that file held."""

    def __init__(self, out: Path):
        self.out = out
        self.seconds: dict[str, float] = {}
        self.cpu: dict[str, float] = {}

    def pytest_runtest_logreport(self, report) -> None:
        _, at, unit = report.nodeid.rpartition("@")
        # A unit's test, as tests/conftest.py names it on the workers ("...@unit"), not an "@"
        # inside a test's parameters ("...[git@host:a/b.git]") where nothing named a unit.
        if at and "]" not in unit:
            self.seconds[unit] = self.seconds.get(unit, 0.0) + report.duration
            properties = dict(report.user_properties)
            cpu = properties.get(CPU_PROPERTY, 0.0)
            self.cpu[unit] = self.cpu.get(unit, 0.0) + cpu
            shared = properties.get(SESSION_CPU_PROPERTY, 0.0)
            if shared:
                self.cpu[SESSION_UNIT] = self.cpu.get(SESSION_UNIT, 0.0) + shared

    def pytest_sessionfinish(self) -> None:
        for path, measured in ((self.out, self.seconds), (self._cpu_out(), self.cpu)):
            if measured:
                merged = read_durations(path) | {k: round(v, 1) for k, v in measured.items()}
                path.write_text(json.dumps(dict(sorted(merged.items())), indent=1) + "\n")

    def _cpu_out(self) -> Path:
        return self.out.with_suffix(".cpu" + self.out.suffix)


CPU_PROPERTY = "cpu_seconds"
SESSION_CPU_PROPERTY = "session_cpu_seconds"
# The workers' session-long children (Chromium, OpenCode, the scripted LLM) are reaped, and
# their CPU counted, in the teardown of each worker's last test: under a unit of their own,
# not the unit that happened to run last (4 units of ~1.5 s showed 12 to 65 CPU-s).
SESSION_UNIT = "(each worker's session-wide servers)"


class CpuProbe:
    """On a worker: each report carries the CPU seconds spent since the last one."""

    def __init__(self):
        self.last = _cpu_seconds()
        self.last_item = False

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        self.last_item = nextitem is None
        yield

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        now = _cpu_seconds()
        spent, self.last = now - self.last, now
        shared = call.when == "teardown" and self.last_item
        property_name = SESSION_CPU_PROPERTY if shared else CPU_PROPERTY
        outcome.get_result().user_properties.append((property_name, spent))


def _cpu_seconds() -> float:
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


def recorder_from_environment() -> DurationRecorder | None:
    out = os.environ.get(OUT_VARIABLE)
    return DurationRecorder(Path(out)) if out else None
