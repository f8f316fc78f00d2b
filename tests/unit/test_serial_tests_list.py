"""`make test` runs most modules on two workers and, after them, one at a time, those that
share something machine-wide (Makefile SERIAL_TESTS). A module that starts the one SLURM
cluster (tests/slurm_cluster.py) and is not on that list would meet another on the cluster's
two GPUs: this test names it."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _serial_tests() -> set[str]:
    makefile = (REPO / "Makefile").read_text().replace("\\\n", " ")
    found = re.search(r"^SERIAL_TESTS := (.*)$", makefile, re.MULTILINE)
    assert found, "the Makefile has no SERIAL_TESTS"
    return set(found.group(1).split())


def test_every_module_on_the_slurm_cluster_runs_alone():
    serial = _serial_tests()
    on_cluster = {
        str(path.relative_to(REPO))
        for path in (REPO / "tests").rglob("test_*.py")
        if "import bring_up_slurm" in path.read_text() and path != Path(__file__)
    }
    assert on_cluster, "no module starts the SLURM cluster: the check looks for the wrong name"
    missing = {
        module
        for module in on_cluster
        if module not in serial and not any(module.startswith(f"{s}/") for s in serial)
    }
    assert not missing, f"add to SERIAL_TESTS in the Makefile: {sorted(missing)}"
