"""A research loop's settings take what its agent config leaves out from the deployment the
runtime passes in (agentsys reads no environment), then the built-in defaults."""

from __future__ import annotations

import pytest

from agentsys.agent import Agent
from agentsys.deployment import Deployment
from agentsys.opencode import Timeouts
from agentsys.research.settings import BadResearchSettings, ResearchSettings

DEPLOYMENT = Deployment(
    model_provider="acme",
    model_id="big",
    opencode_url="http://opencode:4096",
    opencode_username="u",
    opencode_password="secret",
    timeouts=Timeouts(first_token=7, total=70, idle=9),
)


def test_what_the_config_leaves_out_comes_from_the_deployment(tmp_path):
    settings = ResearchSettings.from_config({"workdir": str(tmp_path)}, DEPLOYMENT)
    assert (settings.model_provider, settings.model_id) == ("acme", "big")
    assert settings.opencode_url == "http://opencode:4096"
    assert settings.timeouts == Timeouts(first_token=7, total=70, idle=9)
    assert settings.workdir == tmp_path.resolve()
    assert "secret" not in repr(DEPLOYMENT) and "secret" not in str(settings.public())


def test_the_agent_config_wins_over_the_deployment(tmp_path):
    config = {
        "workdir": str(tmp_path),
        "model_provider": "mine",
        "opencode_url": "http://other",
        "timeouts": {"idle": 3},
    }
    settings = ResearchSettings.from_config(config, DEPLOYMENT)
    assert (settings.model_provider, settings.model_id) == ("mine", "big")
    assert settings.opencode_url == "http://other"
    assert settings.timeouts == Timeouts(first_token=7, total=70, idle=3)


def test_the_workdir_defaults_to_the_deployments(tmp_path):
    deployment = Deployment(workdir=str(tmp_path), opencode_url="http://x")
    assert ResearchSettings.from_config({}, deployment).workdir == tmp_path.resolve()


def test_without_a_deployment_the_built_in_defaults_apply(monkeypatch, tmp_path):
    monkeypatch.setenv("MODEL_PROVIDER", "from-the-environment")
    monkeypatch.setenv("OPENCODE_URL", "http://from-the-environment")
    settings = ResearchSettings.from_config({"workdir": str(tmp_path), "opencode_url": "http://x"})
    assert (settings.model_provider, settings.model_id) == ("demo", "demo-research")
    assert settings.timeouts == Timeouts()
    with pytest.raises(BadResearchSettings, match="no OpenCode server"):
        ResearchSettings.from_config({"workdir": str(tmp_path)})


def test_an_agent_starts_with_an_empty_deployment_until_the_runtime_sets_one():
    assert Agent().deployment == Deployment()


def test_the_experiments_cap_is_eight_unless_the_config_says_otherwise(tmp_path):
    config = {"workdir": str(tmp_path)}
    assert ResearchSettings.from_config(config, DEPLOYMENT).max_experiments_per_iteration == 8
    config["max_experiments_per_iteration"] = 3
    assert ResearchSettings.from_config(config, DEPLOYMENT).max_experiments_per_iteration == 3
    config["max_experiments_per_iteration"] = 0
    with pytest.raises(BadResearchSettings, match="max_experiments_per_iteration"):
        ResearchSettings.from_config(config, DEPLOYMENT)
