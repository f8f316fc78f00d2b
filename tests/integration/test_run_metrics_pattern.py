"""A run's `metrics_pattern`: checked when the run is made (a 422 that says why), then in its
executor's config, and its rerun's."""

import pytest

from agents_app.models import Agent
from hosts_app.models import Host
from scheduler_app.models import GPU, Run

pytestmark = pytest.mark.django_db

PATTERN = r"it (?P<step>\d+) -> cost (?P<cost>\S+)"


@pytest.fixture
def host():
    host = Host.objects.create(name="gpu-box")
    GPU.objects.bulk_create(GPU(host=host, index=i, source="declared") for i in range(2))
    return host


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        ("it (?P<step>\\d+", "metrics_pattern does not compile: missing )"),
        ("cost (\\S+)", "metrics_pattern has no named group"),
        ("", "metrics_pattern is empty"),
        ("x" * 2001, "at most 2000 characters"),
        (["a"], "metrics_pattern"),
    ],
)
def test_a_pattern_that_cannot_be_used_is_422_saying_why(api, pattern, reason):
    response = api(
        "post", "/api/runs", {"name": "x", "command": "true", "metrics_pattern": pattern}
    )

    assert response.status_code == 422
    assert reason in response.json()["detail"]
    assert not Run.objects.exists()


def test_the_pattern_reaches_the_executor_and_the_rerun(api, host, tmp_path):
    created = api(
        "post",
        "/api/runs",
        {
            "name": "p",
            "command": "python t.py",
            "workdir": str(tmp_path),
            "metrics_pattern": PATTERN,
        },
    ).json()
    assert created["executor_options"] == {"metrics_pattern": PATTERN}

    started = api("post", f"/api/runs/{created['id']}/start").json()
    assert Agent.objects.get(pk=started["agent_id"]).config["metrics_pattern"] == PATTERN

    api("post", f"/api/runs/{created['id']}/stop")
    again = api("post", f"/api/runs/{created['id']}/rerun").json()
    assert Agent.objects.get(pk=again["agent_id"]).config["metrics_pattern"] == PATTERN


def test_a_run_without_a_pattern_gives_its_executor_none(api, host, tmp_path):
    created = api(
        "post", "/api/runs", {"name": "p", "command": "true", "workdir": str(tmp_path)}
    ).json()
    started = api("post", f"/api/runs/{created['id']}/start").json()

    assert "metrics_pattern" not in Agent.objects.get(pk=started["agent_id"]).config
