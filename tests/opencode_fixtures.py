"""The real OpenCode server and the project's scripted model, started once per test session
for the tests that need an LLM (the research loop end to end)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from agentsys.opencode.server import DEMO_MODEL, DEMO_PROVIDER, LocalOpenCode, provider_config
from agentsys.scripted_llm import ScriptedLLM


@dataclass
class RunningOpenCode:
    url: str
    password: str
    process: LocalOpenCode
    provider: str = DEMO_PROVIDER
    model: str = DEMO_MODEL


@pytest.fixture(scope="session")
def scripted_llm():
    llm = ScriptedLLM()
    llm.serve_in_thread(port=0)
    yield llm
    llm.stop()


@pytest.fixture(scope="session")
def opencode_server(scripted_llm, tmp_path_factory):
    root = tmp_path_factory.mktemp("opencode")
    (root / "work").mkdir()
    server = LocalOpenCode(
        state_dir=root / "state",
        workdir=root / "work",
        config=provider_config(
            provider=DEMO_PROVIDER, model=DEMO_MODEL, demo_base_url=scripted_llm.base_url + "/v1"
        ),
    )
    url = server.start()
    yield RunningOpenCode(url=url, password=server.password, process=server)
    server.stop()
