"""`make test` runs most modules on two workers, a module's tests on one worker; the modules
that start the one SLURM cluster (tests/slurm_cluster.py) are one xdist group
(tests/conftest.py ON_THE_SLURM_CLUSTER), run one after another. A module that starts the
cluster and is not in that group would meet another on the cluster's two GPUs: this test
names it; the same for the system PostgreSQL (ON_THE_SYSTEM_POSTGRES), which one of them
restarts. No collected module restarts the database server the workers share: the restart
cases (tests/e2e/postgres_restart_cases.py, not named test_*) run on a server of their own."""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


# How a module restarts the server its pytest runs on (settings.EMBEDDED_POSTGRES).
RESTART_WORDS = ("EMBEDDED_POSTGRES.stop_server", "self.embedded.stop_server")


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


def test_the_suite_runs_in_one_parallel_part_and_no_module_restarts_the_shared_server():
    makefile = (REPO / "Makefile").read_text()
    assert "--dist loadgroup" in makefile  # else the SLURM group is not kept together
    assert makefile.count("-m pytest") == 2, "tests/unit, then the rest in one parallel part"
    restarters = {
        str(path.relative_to(REPO))
        for path in (REPO / "tests").rglob("test_*.py")
        if path != Path(__file__) and any(words in path.read_text() for words in RESTART_WORDS)
    }
    assert not restarters, f"these restart the server every worker's database is on: {restarters}"
    cases = (REPO / "tests" / "e2e" / "postgres_restart_cases.py").read_text()
    assert any(words in cases for words in RESTART_WORDS)  # the check looks for the right words


def test_every_module_on_the_system_postgres_runs_in_its_one_group():
    sys.path.insert(0, str(REPO))
    from tests.conftest import ON_THE_SYSTEM_POSTGRES

    on_it = {
        str(path.relative_to(REPO))
        for path in (REPO / "tests").rglob("test_*.py")
        if "AGENTSYS_TEST_EXTERNAL_DATABASE_URL" in path.read_text() and path != Path(__file__)
    }
    assert len(on_it) >= 2, "the check looks for the wrong name"
    group = {name.replace(".", "/") + ".py" for name in ON_THE_SYSTEM_POSTGRES}
    assert not on_it - group, f"add to ON_THE_SYSTEM_POSTGRES: {sorted(on_it - group)}"


def test_a_modules_tests_run_on_one_worker(tmp_path):
    """The grouping really happens (pytest-xdist 3.8's own stopped working under pytest 9.2,
    silently: tests/conftest.py does it now): two modules of four tests on two workers, each
    module's tests all on one worker."""
    import os
    import subprocess

    from tests.longest_first import OUT_VARIABLE

    out = tmp_path / "out"
    out.mkdir()
    for module in ("test_first", "test_second"):
        (tmp_path / f"{module}.py").write_text(
            "import os, time\n"
            "import pytest\n\n"
            "@pytest.mark.parametrize('i', range(4))\n"
            "def test_where(i):\n"
            "    time.sleep(0.1)\n"
            f"    open(os.path.join({str(out)!r}, f'{module}.{{i}}'), 'w')"
            ".write(os.environ['PYTEST_XDIST_WORKER'])\n"
        )
    plugins = ["-p", "tests.conftest", "-p", "no:django", "-p", "no:cacheprovider"]
    result = subprocess.run(
        [sys.executable, "-m", "pytest", *plugins, "-n", "2", "--dist", "loadgroup", str(tmp_path)],
        cwd=tmp_path,
        # A measuring run's out file is the suite's, not this child suite's.
        env={**_without(os.environ, OUT_VARIABLE), "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    for module in ("test_first", "test_second"):
        workers = {path.read_text() for path in out.glob(f"{module}.*")}
        assert len(list(out.glob(f"{module}.*"))) == 4 and len(workers) == 1, (module, workers)


def _without(environ, name: str) -> dict[str, str]:
    return {key: value for key, value in environ.items() if key != name}
