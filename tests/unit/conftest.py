"""Unit tests are of plain-Python agentsys code: run with `-p no:django`, they must not
import Django (nor so start the embedded PostgreSQL its settings would)."""

import sys


def pytest_sessionfinish(session):
    if not session.config.pluginmanager.has_plugin("django"):
        imported = sorted(
            name for name in ("django", "researchagent.settings") if name in sys.modules
        )
        assert not imported, f"a unit test imported {imported}: it belongs in tests/integration"
