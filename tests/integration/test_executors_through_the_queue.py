"""Every executor goes through the GPU queue, whoever starts it, and works in AGENTSYS_WORKDIR
(issue 9 item 9); a run that succeeds says the same word on the run, its request and its
agent, in the database and over the API (item 7). Real runagentd processes."""

import sys
from pathlib import Path

import pytest

from agents_app.models import Agent
from scheduler_app.models import Run, ScheduleRequest
from scheduler_app.runs import launch as runs
from tests.helpers import REPO, wait_until
from tests.runtime_harness import DaemonProcess

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
EXECUTOR = "agentsys.agents.executor.ExecutorAgent"
SHOW = (
    f"{sys.executable} -c \"import os; print('CVD=' + os.environ['CUDA_VISIBLE_DEVICES']); "
    "print('CWD=' + os.getcwd())\""
)


@pytest.fixture
def workdir(tmp_path, settings):
    settings.AGENTSYS_WORKDIR = tmp_path
    return tmp_path


@pytest.fixture
def gpu_host(workdir):
    daemon = DaemonProcess("one-gpu", AGENTSYS_GPUS="1", AGENTSYS_WORKDIR=str(workdir))
    yield daemon
    daemon.stop()


def _checkout_listing() -> set[str]:
    return {path.name for path in REPO.iterdir()}


def _ended(request_id: str) -> ScheduleRequest:
    return wait_until(
        lambda: ScheduleRequest.objects.filter(
            pk=request_id, status__in=["done", "failed", "stopped", "lost", "cancelled"]
        ).first(),
        30,
        message=f"{request_id} to end",
    )


def test_an_executor_posted_to_api_agents_is_queued_gets_its_gpu_and_stays_out_of_the_checkout(
    api, workdir, gpu_host
):
    checkout_before = _checkout_listing()
    response = api(
        "post",
        "/api/agents",
        {"cls_path": EXECUTOR, "goal": "show", "config": {"command": SHOW, "gpu_required": 1}},
    )
    assert response.status_code == 201, response.json()
    agent = response.json()
    assert agent["config"]["workdir"] == str(workdir)
    request = ScheduleRequest.objects.get(agent_id=agent["id"])  # it went through the queue
    assert request.gpu_required == 1

    request = _ended(request.id)
    assert (request.status, request.gpu_indices) == ("done", [0])
    log = (workdir / ".agents" / "runs" / agent["id"] / "run.log").read_text()
    assert "CVD=0" in log.splitlines()
    assert f"CWD={workdir}" in log.splitlines()
    assert Agent.objects.get(pk=agent["id"]).status == "done"
    assert not (REPO / ".agents" / "runs" / agent["id"]).exists()
    assert _checkout_listing() == checkout_before


def test_an_executor_asking_for_more_gpus_than_any_host_has_is_rejected_not_started(
    api, workdir, gpu_host
):
    response = api(
        "post",
        "/api/agents",
        {"cls_path": EXECUTOR, "goal": "big", "config": {"command": "true", "gpu_required": 2}},
    )
    assert response.status_code == 201
    assert response.json()["status"] == "rejected"
    assert "Requires 2 GPUs but only 1 available" in response.json()["error"]


@pytest.mark.parametrize(
    ("config", "complaint"),
    [
        ({"command": "true", "gpu_required": "1"}, "config.gpu_required must be a whole number"),
        ({"command": "true", "gpu_required": -1}, "config.gpu_required must be ≥ 0"),
        ({"command": "true", "workdir": "/no/such/dir"}, "config.workdir: '/no/such/dir'"),
    ],
)
def test_an_executor_config_that_cannot_work_is_422(api, workdir, config, complaint):
    response = api("post", "/api/agents", {"cls_path": EXECUTOR, "goal": "x", "config": config})
    assert response.status_code == 422
    assert complaint in response.json()["detail"]
    assert not Agent.objects.exists()


def test_a_run_that_succeeds_says_done_on_run_request_and_agent(api, workdir, gpu_host):
    run = runs.create_run(name="ok", command="true", gpu_required=1, auto_start=True)
    wait_until(
        lambda: Run.objects.get(pk=run.pk).status not in {"queued", "running"},
        30,
        message="the run to end",
    )
    run = Run.objects.get(pk=run.pk)
    request = ScheduleRequest.objects.get(agent_id=run.agent_id)
    agent = Agent.objects.get(pk=run.agent_id)
    assert (run.status, request.status, agent.status) == ("done", "done", "done")
    assert Path(run.run_dir).parent.parent.parent == workdir
    assert api("get", f"/api/runs/{run.id}").json()["status"] == "done"
    assert api("get", f"/api/scheduler/queue/{request.id}").json()["status"] == "done"
    assert api("get", f"/api/agents/{agent.id}").json()["status"] == "done"
