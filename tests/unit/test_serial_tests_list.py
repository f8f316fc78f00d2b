"""`make test` runs most modules on two workers, a module's tests on one worker; the modules
that start the one SLURM cluster (tests/slurm_cluster.py) are one xdist group
(tests/conftest.py ON_THE_SLURM_CLUSTER), run one after another. A module that starts the
cluster and is not in that group would meet another on the cluster's two GPUs: this test
names it. The test that restarts the database server runs alone, after them (SERIAL_TESTS)."""

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _serial_tests() -> set[str]:
    makefile = (REPO / "Makefile").read_text().replace("\\\n", " ")
    found = re.search(r"^SERIAL_TESTS := (.*)$", makefile, re.MULTILINE)
    assert found, "the Makefile has no SERIAL_TESTS"
    return set(found.group(1).split())


def _slurm_group() -> set[str]:
    sys.path.insert(0, str(REPO))
    from tests.conftest import ON_THE_SLURM_CLUSTER

    return {name.replace(".", "/") + ".py" for name in ON_THE_SLURM_CLUSTER}


def test_every_module_on_the_slurm_cluster_runs_in_its_one_group():
    on_cluster = {
        str(path.relative_to(REPO))
        for path in (REPO / "tests").rglob("test_*.py")
        if "import bring_up_slurm" in path.read_text() and path != Path(__file__)
    }
    assert on_cluster, "no module starts the SLURM cluster: the check looks for the wrong name"
    missing = on_cluster - _slurm_group()
    assert not missing, f"add to ON_THE_SLURM_CLUSTER in tests/conftest.py: {sorted(missing)}"


def test_the_parallel_part_groups_by_xdist_group_and_the_restart_test_runs_alone():
    makefile = (REPO / "Makefile").read_text()
    assert "--dist loadgroup" in makefile  # else the SLURM group is not kept together
    assert _serial_tests() == {"tests/e2e/test_postgres_restart.py"}
