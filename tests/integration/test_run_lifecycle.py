"""A run, its queue request and its executor never disagree (issue 9 items 7 and 8): every
transition of one moves the others in the same transaction, and once it ends all three say
the same word. One test per path that moves a request: submit (queued, rejected), claim,
start, the executor's end (done, failed, stopped, lost), a cancel from the API, the admin,
a stopped parent or a deleted agent, and a host declared dead."""

import contextlib
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents_app.models import Agent
from agentsys.scheduling import FifoFirstFit
from agentsys.types import AgentStatus, EndState, RequestStatus, new_agent_id
from events_app.models import Event
from hosts_app.models import Host, HostStatus
from runtime_app.runtime_store import DjangoRuntimeStore
from scheduler_app import services
from scheduler_app.models import GPU, Run, RunStatus, ScheduleRequest
from scheduler_app.queue import claims as queue
from scheduler_app.queue import lifecycle
from scheduler_app.runs import launch as runs

pytestmark = pytest.mark.django_db
store = DjangoRuntimeStore()


@pytest.fixture
def host():
    host = Host.objects.create(name="box", status=HostStatus.ONLINE, last_heartbeat=timezone.now())
    GPU.objects.bulk_create(GPU(host=host, index=i, source="declared") for i in range(2))
    return host


def queued_run(tmp_path, gpus=1) -> Run:
    return runs.create_run(
        name="train", command="true", workdir=str(tmp_path), gpu_required=gpus, auto_start=True
    )


def states(run: Run) -> tuple[str, str, str]:
    """(run, request, agent) status, read fresh."""
    run = Run.objects.get(pk=run.pk)
    request = ScheduleRequest.objects.get(agent_id=run.agent_id)
    return run.status, request.status, Agent.objects.get(pk=run.agent_id).status


def claim(host):
    return queue.claim(host_id=host.pk, policy=FifoFirstFit())


def test_claim_moves_the_run_to_running_with_its_request(host, tmp_path):
    run = queued_run(tmp_path)
    assert states(run) == ("queued", "queued", "idle")
    claim(host)
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING and run.started_at is not None
    assert ScheduleRequest.objects.get(agent_id=run.agent_id).status == RequestStatus.RUNNING


@pytest.mark.parametrize(
    ("reported", "error", "result", "word", "exit_code"),
    [
        (AgentStatus.DONE, "", {"exit_code": 0}, "done", 0),
        (AgentStatus.FAILED, "RunFailed: command exited with code 3", None, "failed", 3),
        (AgentStatus.STOPPED, "", None, "stopped", None),
        (
            AgentStatus.FAILED,
            "RunFailed: lost: the run ended while no executor watched it, leaving no exit code",
            None,
            "lost",
            None,
        ),
    ],
)
def test_an_executor_end_gives_run_request_and_agent_one_word(
    host, tmp_path, reported, error, result, word, exit_code
):
    run = queued_run(tmp_path)
    claim(host)
    store.transition(
        agent_id=run.agent_id, status=AgentStatus.RUNNING, kind="started", payload={}, pid=1
    )
    assert states(run) == ("running", "running", "running")
    event = store.transition(
        agent_id=run.agent_id,
        status=reported,
        kind=str(reported),
        payload={},
        error=error,
        result=result,
    )
    assert states(run) == (word, word, word)
    assert (event["kind"], event["payload"]["status"]) == (word, word)
    assert Run.objects.get(pk=run.pk).exit_code == exit_code
    assert not GPU.objects.filter(allocated_to__isnull=False).exists()


def test_an_executor_stopped_before_it_started_is_cancelled_with_its_run(host, tmp_path):
    run = queued_run(tmp_path, gpus=2)
    waiting = queued_run(tmp_path, gpus=2)
    claim(host)  # the first takes both GPUs; the second waits
    store.mark_stopped(agent_id=waiting.agent_id)
    assert states(waiting) == ("cancelled", "cancelled", "cancelled")
    assert states(run) == ("running", "running", "idle")


def test_rejected_at_submit_rejects_run_request_and_agent(host, tmp_path):
    run = queued_run(tmp_path, gpus=3)
    assert states(run) == ("rejected", "rejected", "rejected")
    assert "Requires 3 GPUs but only 2 available" in Run.objects.get(pk=run.pk).error


def test_cancel_through_the_api_cancels_the_run_and_start_then_starts_it_afresh(
    api, host, tmp_path
):
    run = queued_run(tmp_path)
    request = ScheduleRequest.objects.get(agent_id=run.agent_id)
    response = api("post", f"/api/scheduler/queue/{request.id}/cancel")
    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    assert states(run) == ("cancelled", "cancelled", "cancelled")
    assert api("get", f"/api/runs/{run.id}").json()["status"] == "cancelled"
    [event] = Event.objects.filter(agent_id=run.agent_id, kind="cancelled")
    assert event.payload["request_id"] == request.id

    started = api("post", f"/api/runs/{run.id}/start")
    assert started.status_code == 200, started.json()
    body = started.json()
    assert body["status"] == "queued" and body["agent_id"] != run.agent_id  # a new start
    assert ScheduleRequest.objects.get(agent_id=body["agent_id"]).status == "queued"
    [placed] = claim(host)
    assert (placed.agent_id, placed.gpu_indices) == (body["agent_id"], [0])
    assert Run.objects.get(pk=run.pk).status == RunStatus.RUNNING


def test_cancel_in_the_admin_cancels_the_run(admin_client, host, tmp_path):
    run = queued_run(tmp_path)
    request = ScheduleRequest.objects.get(agent_id=run.agent_id)
    admin_client.post(
        reverse("admin:scheduler_app_schedulerequest_changelist"),
        {"action": "cancel", "_selected_action": [request.pk]},
    )
    assert states(run) == ("cancelled", "cancelled", "cancelled")


def test_stopping_a_queued_run_cancels_it_with_its_request(host, tmp_path):
    run = queued_run(tmp_path)
    assert runs.stop_run(run_id=run.id).status == RunStatus.CANCELLED
    assert states(run) == ("cancelled", "cancelled", "cancelled")


def test_a_stopped_parent_cancels_its_queued_childrens_runs(host, tmp_path):
    parent = Agent.objects.create(
        id=new_agent_id("orchestrator"), role="orchestrator", cls_path="x", project="p"
    )
    run = queued_run(tmp_path, gpus=2)
    blocker = queued_run(tmp_path, gpus=2)
    claim(host)
    Agent.objects.filter(pk=blocker.agent_id).update(parent=parent)
    Agent.objects.filter(pk=run.agent_id).update(parent=parent)
    ScheduleRequest.objects.update(parent=parent)
    [cancelled] = store.cancel_queued_requests(parent_ids=[parent.id])  # the one still queued
    assert (cancelled["kind"], cancelled["agent_id"]) == ("cancelled", blocker.agent_id)
    assert states(blocker) == ("cancelled", "cancelled", "cancelled")
    assert states(run)[:2] == ("running", "running")  # placed already: the stop reaches it


def test_a_deleted_agent_cancels_its_queued_run(host, tmp_path):
    run = queued_run(tmp_path)
    request = ScheduleRequest.objects.get(agent_id=run.agent_id)
    Agent.objects.filter(pk=run.agent_id).delete()
    assert lifecycle.close_agentless_requests() == 1
    assert ScheduleRequest.objects.get(pk=request.pk).status == RequestStatus.CANCELLED
    assert Run.objects.get(pk=run.pk).status == RunStatus.CANCELLED


def test_a_dead_host_loses_run_request_and_agent_frees_the_gpus_and_its_return_undoes_it(
    host, tmp_path
):
    run = queued_run(tmp_path)
    claim(host)
    store.transition(
        agent_id=run.agent_id, status=AgentStatus.RUNNING, kind="started", payload={}, pid=1
    )
    booked = list(GPU.objects.filter(allocated_to__isnull=False).values_list("index", flat=True))
    Host.objects.filter(pk=host.pk).update(last_heartbeat=timezone.now() - timedelta(minutes=5))
    store.declare_dead_hosts(stale_after=20)
    assert states(run) == ("lost", "lost", "lost")
    assert Run.objects.get(pk=run.pk).error.startswith("host down: ")
    assert not GPU.objects.filter(allocated_to__isnull=False).exists()
    _check_agreement()

    assert store.record_heartbeat(host_id=host.pk) is True  # it was declared dead meanwhile
    [event] = store.readopt_lost_runs(host_id=host.pk)
    assert event["kind"] == "readopted"
    assert states(run) == ("running", "running", "running")
    assert Run.objects.get(pk=run.pk).error == ""
    again = GPU.objects.filter(allocated_to__isnull=False).values_list("index", flat=True)
    assert list(again) == booked  # on the GPUs it had
    assert store.record_heartbeat(host_id=host.pk) is False
    assert store.readopt_lost_runs(host_id=host.pk) == []  # once


# Every shared end word applies to runs, except the one for a chat reply cut off mid-stream.
RUN_ENDS = set(EndState) - {EndState.INTERRUPTED}


def test_run_and_request_end_states_are_the_shared_words():
    assert {
        s for s in RunStatus.values if s not in {"ready", "queued", "running", "paused"}
    } == RUN_ENDS
    assert {s for s in RequestStatus if s not in {"queued", "running"}} == RUN_ENDS


END = {str(word) for word in EndState}


def _check_agreement() -> None:
    for run in Run.objects.exclude(agent=None):
        request = ScheduleRequest.objects.get(agent_id=run.agent_id)
        agent = Agent.objects.get(pk=run.agent_id)
        if run.status in END:
            assert (request.status, agent.status) == (run.status, run.status), run.id
            assert not GPU.objects.filter(allocated_to=request).exists()
        elif run.status == RunStatus.QUEUED:
            assert (request.status, agent.status) == ("queued", "idle"), run.id
        else:
            assert run.status == RunStatus.RUNNING, run.id
            assert request.status == "running" and agent.status in {"idle", "running"}, run.id


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    ops=st.lists(
        st.tuples(
            st.sampled_from(["start", "claim", "begin", "end", "cancel", "stop", "restart"]),
            st.integers(0, 3),
            st.sampled_from(
                [AgentStatus.DONE, AgentStatus.FAILED, AgentStatus.STOPPED, AgentStatus.LOST]
            ),
        ),
        min_size=3,
        max_size=30,
    )
)
def test_whatever_happens_a_run_its_request_and_its_agent_agree(tmp_path, ops):
    Run.objects.all().delete()
    ScheduleRequest.objects.all().delete()
    Agent.objects.all().delete()
    Host.objects.all().delete()
    host = Host.objects.create(name="box", status=HostStatus.ONLINE)
    GPU.objects.bulk_create(GPU(host=host, index=i, source="declared") for i in range(2))
    for op, n, end in ops:
        pick = Run.objects.order_by("created_at", "id")[n : n + 1].first()
        request = pick and ScheduleRequest.objects.filter(agent_id=pick.agent_id).first()
        if op == "start":
            queued_run(tmp_path, gpus=n)
        elif op == "claim":
            claim(host)
        elif op == "begin" and request and request.status == "running":
            store.transition(
                agent_id=pick.agent_id,
                status=AgentStatus.RUNNING,
                kind="started",
                payload={},
                pid=1,
            )
        elif op == "end" and request and request.status in {"queued", "running"}:
            lost = "lost: no exit code" if end == AgentStatus.LOST else ""
            status = AgentStatus.FAILED if lost else end
            store.transition(
                agent_id=pick.agent_id, status=status, kind=str(status), payload={}, error=lost
            )
        elif op == "cancel" and request:
            with contextlib.suppress(services.ServiceError):
                services.cancel_request(request_id=request.id)
        elif op == "stop" and pick:
            with contextlib.suppress(runs.RunRefused):
                runs.stop_run(run_id=pick.id)
        elif op == "restart" and pick:
            with contextlib.suppress(runs.RunRefused):
                runs.start_run(run_id=pick.id)
        _check_agreement()


def test_runagentd_never_claims_an_executor_row_that_skipped_the_queue(host):
    for role in ("executor", "orchestrator"):
        Agent.objects.create(id=f"{role}-stray", role=role, cls_path="x", project="p")
    claimed = store.claim_pending_agents(host_id=host.pk, limit=10)
    assert [record.id for record in claimed] == ["orchestrator-stray"]
