"""A deployment's settings name the model calls' timeouts without importing the HTTP client:
every manage.py process and runagentd reads them, most never call a model, and httpx with the
CLI it carries (rich, pygments, click) cost each of them ~60 ms of CPU."""

import subprocess
import sys

from tests.helpers import REPO


def _modules_after(statement: str) -> set[str]:
    code = f"{statement}\nimport sys\nprint(' '.join(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return set(done.stdout.split())


def test_the_settings_and_their_timeouts_load_without_the_http_client():
    loaded = _modules_after("from agentsys.research.settings import ResearchSettings")
    assert "agentsys.deployment" in loaded and "agentsys.opencode.timeouts" in loaded
    assert "httpx" not in loaded and "agentsys.opencode.client" not in loaded


def test_the_client_loads_where_it_is_named():
    loaded = _modules_after(
        "from agentsys.opencode import OpenCodeClient, PromptResult, Timeouts\n"
        "assert OpenCodeClient.__module__ == 'agentsys.opencode.client'\n"
        "assert PromptResult.__module__ == 'agentsys.opencode.client'\n"
        "import agentsys.opencode.client as c\n"
        "assert c.Timeouts is Timeouts"
    )
    assert "httpx" in loaded


def test_a_name_the_package_does_not_have_is_an_attribute_error():
    loaded = _modules_after(
        "import agentsys.opencode as o\n"
        "try:\n    o.NoSuchThing\nexcept AttributeError as e:\n    assert 'NoSuchThing' in str(e)\n"
        "else:\n    raise SystemExit('no AttributeError')"
    )
    assert "httpx" not in loaded
