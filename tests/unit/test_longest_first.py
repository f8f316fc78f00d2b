"""tests/longest_first.py: the suite's units go out longest first, and a run records each
unit's seconds and CPU seconds over what the file held."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from tests.longest_first import CPU_PROPERTY, DurationRecorder, order_longest_first


def test_units_go_longest_first_whole_and_in_their_own_order():
    items = ["a1", "b1", "a2", "c1", "c2", "c3", "b2"]  # unit = first letter
    known = {"a": 5.0, "b": 100.0}  # c is not known: 3 tests at 2 s each
    order_longest_first(items, lambda item: item[0], known)
    assert items == ["b1", "b2", "c1", "c2", "c3", "a1", "a2"]


def test_a_run_records_each_units_seconds_and_cpu_over_what_the_file_held(tmp_path):
    out = tmp_path / "durations.json"
    out.write_text(json.dumps({"tests.old": 7.0, "tests.a": 1.0}))
    recorder = DurationRecorder(out)
    for nodeid, duration, cpu in (
        ("tests/a.py::t1@tests.a", 2.0, 0.5),
        ("tests/a.py::t2@tests.a", 3.0, 1.0),
        ("tests/s.py::t@slurm-cluster", 4.0, 0.3),
        ("tests/unit/x.py::t", 9.0, 9.0),  # no unit: not under --dist loadgroup
        ("tests/unit/x.py::t[git@host:a/b.git]", 9.0, 9.0),  # an "@" of its parameters
    ):
        report = SimpleNamespace(
            nodeid=nodeid, duration=duration, user_properties=[(CPU_PROPERTY, cpu)]
        )
        recorder.pytest_runtest_logreport(report)
    recorder.pytest_sessionfinish()
    assert json.loads(out.read_text()) == {
        "slurm-cluster": 4.0,
        "tests.a": 5.0,
        "tests.old": 7.0,
    }
    cpu = json.loads((tmp_path / "durations.cpu.json").read_text())
    assert cpu == {"slurm-cluster": 0.3, "tests.a": 1.5}


def test_the_cpu_of_each_workers_session_wide_servers_is_a_unit_of_its_own(tmp_path):
    """A session-wide server (Chromium, OpenCode) is reaped in the teardown of its worker's
    last test: its CPU goes under SESSION_UNIT, not to whichever module ran last."""
    import os
    import subprocess
    import sys

    from tests.longest_first import OUT_VARIABLE, SESSION_UNIT

    burn = "import time; t = time.process_time()\nwhile time.process_time() - t < 0.6: pass"
    (tmp_path / "conftest.py").write_text(
        "import subprocess, sys\nimport pytest\n\n"
        "@pytest.fixture(scope='session', autouse=True)\n"
        "def server():\n"
        "    yield\n"
        f"    subprocess.run([sys.executable, '-c', {burn!r}], check=True)\n"
    )
    for module in ("test_first", "test_second"):
        (tmp_path / f"{module}.py").write_text("def test_it():\n    pass\n")
    out = tmp_path / "durations.json"
    repo = str(Path(__file__).resolve().parents[2])
    plugins = ["-p", "tests.conftest", "-p", "no:django", "-p", "no:cacheprovider"]
    result = subprocess.run(
        [sys.executable, "-m", "pytest", *plugins, "-n", "2", "--dist", "loadgroup", str(tmp_path)],
        cwd=tmp_path,
        env={**os.environ, OUT_VARIABLE: str(out), "PYTHONPATH": repo},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    cpu = json.loads((tmp_path / "durations.cpu.json").read_text())
    assert cpu[SESSION_UNIT] >= 1.0, cpu  # two workers' servers, 0.6 CPU-s each
    assert all(seconds < 0.5 for unit, seconds in cpu.items() if unit != SESSION_UNIT), cpu
