"""REST for the queue, runs and alerts: the happy paths and bad input → 4xx."""

import pytest

from agents_app.models import Agent
from agentsys.types import AgentStatus, RequestStatus, new_agent_id
from hosts_app.models import Host
from scheduler_app.models import GPU, Alert, AlertStatus, Run, RunStatus, ScheduleRequest
from scheduler_app.queue import claims as queue
from scheduler_app.runs import launch as runs

pytestmark = pytest.mark.django_db


@pytest.fixture
def host():
    host = Host.objects.create(name="gpu-box")
    GPU.objects.bulk_create(GPU(host=host, index=i, source="declared") for i in range(2))
    return host


def submit(gpus=1):
    agent = Agent.objects.create(
        id=new_agent_id("executor"), role="executor", cls_path="x", project="p", goal="train"
    )
    return queue.submit(agent=agent, gpu_required=gpus)


def test_queue_list_filters_and_pages(api, host):
    first, second = submit(), submit()
    submit(9)  # rejected
    body = api("get", "/api/scheduler/queue?status=queued&limit=1").json()
    assert body["count"] == 2 and [r["id"] for r in body["items"]] == [first.id]
    page2 = api("get", "/api/scheduler/queue?status=queued&limit=1&offset=1").json()
    assert [r["id"] for r in page2["items"]] == [second.id]
    rejected = api("get", "/api/scheduler/queue?status=rejected").json()["items"]
    assert rejected[0]["rejection_reason"] == "Requires 9 GPUs but only 2 available"


@pytest.mark.parametrize("query", ["status=sleeping", "status=QUEUED"])
def test_unknown_status_is_400(api, query):
    response = api("get", f"/api/scheduler/queue?{query}")
    assert response.status_code == 400
    assert "status must be one of" in response.json()["detail"]


def test_request_detail_cancel_and_stats(api, host):
    request = submit()
    assert api("get", f"/api/scheduler/queue/{request.id}").json()["status"] == "queued"
    assert api("get", "/api/scheduler/queue/sched-nope").status_code == 404
    assert api("post", "/api/scheduler/queue/sched-nope/cancel").status_code == 404
    cancelled = api("post", f"/api/scheduler/queue/{request.id}/cancel")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert Agent.objects.get(pk=request.agent_id).status == AgentStatus.CANCELLED
    again = api("post", f"/api/scheduler/queue/{request.id}/cancel")
    assert again.status_code == 409 and "only queued requests" in again.json()["detail"]
    stats = api("get", "/api/scheduler/stats").json()
    assert stats["total"]["gpu_total"] == 2
    assert stats["total"]["by_status"]["cancelled"] == 1
    assert set(stats["hosts"]["gpu-box"]) >= {
        "gpu_total",
        "gpu_allocated",
        "gpu_available",
        "queue_size",
        "running",
        "total_requests",
    }


@pytest.mark.parametrize("gpus", [-1, 1.5, "2", 10**9, True, None])
def test_run_with_bad_gpu_required_is_422(api, gpus):
    response = api("post", "/api/runs", {"name": "x", "command": "true", "gpu_required": gpus})
    assert response.status_code == 422
    assert not Run.objects.exists()


@pytest.mark.parametrize(
    "body",
    [
        {"name": "x"},
        {"command": "true"},
        {"name": "x", "command": "true", "oops": 1},
        {"name": "", "command": "true"},
        {"name": "x", "command": "true", "workdir": "/nonexistent"},
        {"name": "x", "command": "true", "max_retries": -1},
        {"name": "x", "command": "true", "max_retries": "3"},
        {"name": "x", "command": "true", "max_retries": 1.5},
        {"name": "x", "command": "true", "retry_base_delay": -2},
        {"name": "x", "command": "true", "thresholds": {"window": 0}},
        {"name": "x", "command": "true", "thresholds": {"high_loss": 0}},
        {"name": "x", "command": "true", "thresholds": {"spike": 2}},
        {"name": "x", "command": "true", "thresholds": [8.0]},
    ],
)
def test_run_with_a_bad_body_is_422(api, body):
    response = api("post", "/api/runs", body)
    assert response.status_code == 422
    assert response.json()["detail"]
    assert not Run.objects.exists()


def test_a_runs_retries_and_thresholds_reach_its_executor_and_its_rerun(api, host, tmp_path):
    options = {"max_retries": 1, "retry_base_delay": 0.5, "thresholds": {"high_loss": 4.0}}
    created = api(
        "post",
        "/api/runs",
        {"name": "tuned", "command": "python train.py", "workdir": str(tmp_path), **options},
    ).json()
    assert created["executor_options"] == options
    started = api("post", f"/api/runs/{created['id']}/start").json()
    config = Agent.objects.get(pk=started["agent_id"]).config
    assert {key: config[key] for key in options} == options
    assert config["command"] == "python train.py"
    api("post", f"/api/runs/{created['id']}/stop")
    again = api("post", f"/api/runs/{created['id']}/rerun").json()
    assert again["executor_options"] == options
    config = Agent.objects.get(pk=again["agent_id"]).config
    assert config["thresholds"] == {"high_loss": 4.0} and config["max_retries"] == 1


def test_run_needing_gpus_where_there_are_none_is_rejected_with_the_reason(api):
    body = api(
        "post",
        "/api/runs",
        {"name": "big", "command": "python train.py", "gpu_required": 1, "auto_start": True},
    ).json()
    assert body["status"] == "rejected"
    assert "Requires 1 GPUs but only 0 available" in body["error"]


def test_run_lifecycle_ready_start_stop_rerun(api, host, tmp_path):
    created = api(
        "post",
        "/api/runs",
        {
            "name": "baseline",
            "command": "python train.py",
            "workdir": str(tmp_path),
            "params": {"lr": 0.1},
        },
    )
    assert created.status_code == 201
    run = created.json()
    assert run["status"] == "ready" and run["agent_id"] is None
    assert api("post", f"/api/runs/{run['id']}/rerun").status_code == 409
    started = api("post", f"/api/runs/{run['id']}/start").json()
    assert started["status"] == "queued"
    agent = Agent.objects.get(pk=started["agent_id"])
    assert agent.config["command"] == "python train.py" and agent.config["params"] == {"lr": 0.1}
    assert ScheduleRequest.objects.get(agent=agent).status == RequestStatus.QUEUED
    assert api("post", f"/api/runs/{run['id']}/start").status_code == 409
    stopped = api("post", f"/api/runs/{run['id']}/stop").json()
    assert stopped["status"] == "cancelled"  # it never started
    assert ScheduleRequest.objects.get(agent=agent).status == RequestStatus.CANCELLED
    rerun = api("post", f"/api/runs/{run['id']}/rerun").json()
    assert rerun["id"] != run["id"] and rerun["status"] == "queued"
    listed = api("get", "/api/runs?status=cancelled").json()
    assert [r["id"] for r in listed] == [run["id"]]
    assert api("get", "/api/runs?status=bogus").status_code == 400
    assert api("get", "/api/runs/run-nope").status_code == 404


def test_executor_options_reach_the_executor_but_never_override_the_run(host, tmp_path):
    run = runs.create_run(
        name="retrying",
        command="python train.py",
        workdir=str(tmp_path),
        auto_start=True,
        executor_options={"max_retries": 2, "retry_base_delay": 0.1, "command": "rm -rf ~"},
    )
    config = Agent.objects.get(pk=run.agent_id).config
    assert (config["max_retries"], config["retry_base_delay"]) == (2, 0.1)
    assert config["command"] == "python train.py"


def test_logs_by_offset(api, tmp_path):
    run = Run.objects.create(
        name="x", command="true", run_dir=str(tmp_path), status=RunStatus.RUNNING
    )
    (tmp_path / "run.log").write_text("line one\nline two\n")
    first = api("get", f"/api/runs/{run.id}/logs?limit=9").json()
    assert first == {
        "offset": 0,
        "next_offset": 9,
        "size": 18,
        "text": "line one\n",
        "capped": False,
        "host": "",  # made by hand: no host ran it, and the file is read where it is
    }
    rest = api("get", f"/api/runs/{run.id}/logs?offset=9").json()
    assert rest["text"] == "line two\n" and rest["next_offset"] == 18
    assert api("get", f"/api/runs/{run.id}/logs?offset=-1").status_code == 422


def test_alerts_list_and_respond(api):
    alert = Alert.objects.create(
        agent_id="executor-1",
        message="High loss",
        severity="warning",
        choices=["acknowledge", "stop"],
    )
    listed = api("get", "/api/alerts?status=pending").json()
    assert [a["id"] for a in listed] == [alert.id]
    bad = api("post", f"/api/alerts/{alert.id}/respond", {"response": "explode"})
    assert bad.status_code == 409 and "must be one of" in bad.json()["detail"]
    ok = api("post", f"/api/alerts/{alert.id}/respond", {"response": "acknowledge"})
    assert ok.status_code == 200 and ok.json()["status"] == "resolved"
    assert Alert.objects.get(pk=alert.id).status == AlertStatus.RESOLVED
    assert (
        api("post", f"/api/alerts/{alert.id}/respond", {"response": "acknowledge"}).status_code
        == 409
    )
    assert (
        api("post", "/api/alerts/alert-nope/respond", {"response": "acknowledge"}).status_code
        == 404
    )
    assert api("post", f"/api/alerts/{alert.id}/respond", {}).status_code == 422
    assert api("get", "/api/alerts?status=weird").status_code == 400


def test_stop_response_stops_the_agent_that_raised_an_alert_without_a_run(api):
    from agents_app.models import AgentCommand

    agent = Agent.objects.create(
        id=new_agent_id("executor"),
        role="executor",
        cls_path="x",
        project="p",
        status=AgentStatus.RUNNING,
    )
    alert = Alert.objects.create(
        agent_id=agent.id, message="NaN loss", severity="critical", choices=["acknowledge", "stop"]
    )
    assert api("post", f"/api/alerts/{alert.id}/respond", {"response": "stop"}).status_code == 200
    [command] = AgentCommand.objects.filter(agent=agent)
    assert command.kind == "stop"
