"""tests/unit is plain Python (`pytest tests/unit -p no:django`: no settings, no database);
everything else runs under pytest-django with the fixtures of tests/django_fixtures.py."""

import pytest

from tests.longest_first import CpuProbe, LongestFirst, recorder_from_environment


def pytest_configure(config):
    if config.pluginmanager.has_plugin("django"):
        config.pluginmanager.import_plugin("tests.django_fixtures")
    if hasattr(config.option, "loadscopereorder"):
        # The units go out in the order the workers collected them: longest first (below).
        config.option.loadscopereorder = False
    if _grouping(config):
        config.pluginmanager.register(LongestFirst(_group_of), "longest-first")
    recorder = recorder_from_environment()
    if recorder is not None:  # the controller sums what each worker's reports carry
        on_a_worker = hasattr(config, "workerinput")
        config.pluginmanager.register(CpuProbe() if on_a_worker else recorder, "unit-durations")


# The modules that use the one SLURM cluster (its two GPUs): under `make test`'s two workers
# they run one after the other, on one worker, while the other worker goes on with the rest.
ON_THE_SLURM_CLUSTER = {
    "tests.browser.test_ui_slurm_queue",
    "tests.integration.test_slurm_cluster",
    "tests.integration.test_slurm_runs",
    "tests.integration.test_mcp_slurm_cluster",
    "tests.e2e.test_research_on_slurm",
    "tests.e2e.test_mcp_slurm_through_opencode",
}


# The modules on the system PostgreSQL (CI: 127.0.0.1:5432): one of them restarts it, so they
# run one after the other too.
ON_THE_SYSTEM_POSTGRES = {
    "tests.e2e.test_external_database",
    "tests.e2e.test_postgres_restart",
}


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups (--dist loadgroup)
def pytest_collection_modifyitems(config, items):
    """Each module is one unit of work for a worker (its module fixtures made once, its tests
    never beside each other), but the modules sharing the SLURM cluster, and those sharing the
    system PostgreSQL, are one unit together each."""
    grouping = _grouping(config)
    for item in items:
        group = _group_of(item)
        item.add_marker(pytest.mark.xdist_group(group))
        if grouping:
            _in_group(item, group)


def _grouping(config) -> bool:
    """Whether this is a worker of `--dist loadgroup` (pytest-xdist sets the `loadgroup`
    option there; its `dist` is "no")."""
    return hasattr(config, "workerinput") and bool(getattr(config.option, "loadgroup", False))


def _group_of(item) -> str:
    module = item.module.__name__ if item.module is not None else item.nodeid
    if module in ON_THE_SLURM_CLUSTER:
        return "slurm-cluster"
    if module in ON_THE_SYSTEM_POSTGRES:
        return "system-postgres"
    return module


def _in_group(item, group: str) -> None:
    """What pytest-xdist 3.8 does with the marker (`<nodeid>@<group>`, which its scheduler
    reads), done here: it sets `item._nodeid`, which pytest 9.2 no longer reads (a node's id
    is `item._id`), so every test went to whichever worker was free, a module's tests beside
    each other and the SLURM group's modules on both workers at once."""
    from _pytest.nodeid import NodeId

    if "@" not in item.nodeid.rpartition("]")[2].rpartition("::")[2]:
        item._id = NodeId.parse(f"{item.nodeid}@{group}")
