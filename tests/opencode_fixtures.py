"""The real OpenCode server and the project's scripted model, started once per test session
for the tests that need an LLM (the research loop and chat end to end), and the project
and runagentd those tests run against."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass

import pytest

from agentsys.opencode.server import DEMO_MODEL, DEMO_PROVIDER, LocalOpenCode, provider_config
from agentsys.scripted_llm import ScriptedLLM
from tests.helpers import REPO
from tests.runtime_harness import DaemonProcess

DEMO_SCRIPTS = ("train.py", "train_tensorboard.py", "train_prints.py")
TRAIN = REPO / "researchagent" / "demo_workspace" / "train.py"


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
        project_config=True,  # as `make run` starts it: a workdir's opencode.json counts
    )
    url = server.start()
    yield RunningOpenCode(url=url, password=server.password, process=server)
    server.stop()


@pytest.fixture
def workdir(tmp_path, settings):
    work = tmp_path / "project"
    work.mkdir()
    for script in DEMO_SCRIPTS:  # the demo loop runs each (one way of logging each)
        shutil.copy(TRAIN.parent / script, work / script)
    for args in (["init", "-q"], ["add", *DEMO_SCRIPTS], ["commit", "-q", "-m", "start"]):
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=work, check=True
        )
    settings.AGENTSYS_WORKDIR = work
    return work


@pytest.fixture
def make_daemon(workdir, opencode_server):
    started = []

    def start(**extra) -> DaemonProcess:
        env = {
            "AGENTSYS_GPUS": "1",
            "AGENTSYS_WORKDIR": str(workdir),
            "OPENCODE_URL": opencode_server.url,
            "OPENCODE_SERVER_PASSWORD": opencode_server.password,
            "MODEL_PROVIDER": opencode_server.provider,
            "MODEL_ID": opencode_server.model,
            **extra,
        }
        process = DaemonProcess("research-host", **env)
        process.env = env
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()
