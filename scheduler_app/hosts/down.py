"""The runs of a host declared dead, and of its return.

A host that stops heart-beating may be gone, or only cut off from the database while its
runs go on. So nothing of it is re-run elsewhere behind its back:
- a run placed on it that never started (its executor still idle) goes back to the queue,
  where any host that fits takes it;
- a run that started is `lost` with "host down" (its executor, request and run alike, its GPUs
  free: the host takes no runs while it is dead). The error's "host down" prefix on a lost
  executor of the host is how its return finds what to re-adopt.
When its runagentd is back (restarted, or its database connection is), those executors,
requests and runs say `running` again on the GPUs they had, and the executor re-adopts the
process (or records the exit code it left meanwhile): the record is corrected, never silently
re-run.
A lost run's GPU time goes to the ledger as any run's end does (from its claim to now, when
its GPUs are freed); re-adopted, that entry is withdrawn, and the run's real end records the
whole span once.
"""

from __future__ import annotations

from django.utils import timezone

from agents_app.models import Agent
from agentsys.types import LIVE_AGENT_STATUSES, AgentRole, AgentStatus, RequestStatus
from hosts_app.models import Host
from ledger_app.services import withdraw_run_gpu
from scheduler_app import oplog
from scheduler_app.models import GPU, Run, RunStatus, ScheduleRequest
from scheduler_app.queue import claims as queue
from scheduler_app.queue import spend

HOST_DOWN = "host down"


def host_down_error(host: Host) -> str:
    beat = host.last_heartbeat.isoformat(timespec="seconds") if host.last_heartbeat else "never"
    return (
        f"{HOST_DOWN}: {host.name} stopped heart-beating (last at {beat}); the run may still "
        "be going there, and is re-adopted if its runagentd comes back"
    )


def settle_runs_of_dead_host(host: Host) -> list[tuple[str, str, dict]]:
    """Requeue what was placed on `host` but never started, mark lost what started. Returns
    (agent_id, event kind, payload) for the events to record. Call in a transaction."""
    moves = []
    executors = Agent.objects.select_for_update().filter(
        host=host, role=AgentRole.EXECUTOR, status__in=LIVE_AGENT_STATUSES
    )
    for agent in executors:
        request = ScheduleRequest.objects.filter(
            agent_id=agent.pk, status=RequestStatus.RUNNING
        ).first()
        if agent.status == AgentStatus.IDLE and request is not None:
            moves.append(_requeue(agent, request, host))
        else:
            moves.append(_lose(agent, host))
    return moves


def _requeue(agent: Agent, request: ScheduleRequest, host: Host) -> tuple[str, str, dict]:
    reason = f"{HOST_DOWN}: {host.name} went down before the run started; back in the queue"
    GPU.objects.filter(allocated_to=request).update(allocated_to=None, allocated_at=None)
    ScheduleRequest.objects.filter(pk=request.pk).update(
        status=RequestStatus.QUEUED, host=None, started_at=None, gpu_indices=[]
    )
    config = {k: v for k, v in agent.config.items() if k != "gpu_indices"}
    Agent.objects.filter(pk=agent.pk).update(host=None, config=config)
    Run.objects.filter(agent_id=agent.pk, status__in=RunStatus.open()).update(
        status=RunStatus.QUEUED, started_at=None, updated_at=timezone.now()
    )
    queue.notify_queue()
    payload = {"status": str(AgentStatus.IDLE), "reason": reason, "parent_id": agent.parent_id}
    return agent.pk, "requeued", payload


def _lose(agent: Agent, host: Host) -> tuple[str, str, dict]:
    error, now = host_down_error(host), timezone.now()
    Agent.objects.filter(pk=agent.pk).update(status=AgentStatus.LOST, error=error, finished_at=now)
    requests = ScheduleRequest.objects.filter(agent_id=agent.pk, status=RequestStatus.RUNNING)
    # Read before the run's end is written; the first running request is its GPUs' claim.
    spend.record_run_ends(
        spend.ending_runs(agent.pk), agent_id=agent.pk, request=requests.first(), now=now
    )
    GPU.objects.filter(allocated_to__in=requests).update(allocated_to=None, allocated_at=None)
    requests.update(status=RequestStatus.LOST, finished_at=now)
    ended = Run.objects.filter(agent_id=agent.pk, status__in=RunStatus.open()).update(
        status=RunStatus.LOST, error=error, finished_at=now, updated_at=now
    )
    if ended:
        oplog.run_moved(agent_id=agent.pk, status=RunStatus.LOST, exit_code=None, error=error)
    payload = {"status": str(AgentStatus.LOST), "error": error, "parent_id": agent.parent_id}
    return agent.pk, str(AgentStatus.LOST), payload


def readopt_runs_of_returned_host(host_id: int) -> list[tuple[str, str, dict]]:
    """The executors lost with their host (see the module's docstring) run again on it: they,
    their requests (on the GPUs they had) and their runs say `running`, for their runagentd
    to re-adopt. Call in a transaction."""
    rows = dict(
        Agent.objects.select_for_update()
        .filter(
            host_id=host_id,
            role=AgentRole.EXECUTOR,
            status=AgentStatus.LOST,
            error__startswith=f"{HOST_DOWN}:",
        )
        .values_list("pk", "parent_id")
    )
    if not rows:
        return []
    lost = list(rows)
    Agent.objects.filter(pk__in=lost).update(status=AgentStatus.RUNNING, error="", finished_at=None)
    for request in ScheduleRequest.objects.select_for_update().filter(
        agent_id__in=lost, status=RequestStatus.LOST
    ):
        # Its GPUs were freed with it; nobody else takes a dead host's GPUs, but the host's
        # own claim may have run first after a cut-off: a GPU taken since stays the taker's.
        GPU.objects.filter(
            host_id=host_id, index__in=request.gpu_indices, allocated_to__isnull=True
        ).update(allocated_to=request, allocated_at=timezone.now())
        request.status, request.finished_at = RequestStatus.RUNNING, None
        request.save(update_fields=["status", "finished_at"])
    readopted = Run.objects.filter(agent_id__in=lost, status=RunStatus.LOST)
    # Its end records the span from its claim (its request kept started_at) to its real end.
    withdraw_run_gpu(run_ids=list(readopted.values_list("pk", flat=True)))
    readopted.update(
        status=RunStatus.RUNNING, error="", finished_at=None, updated_at=timezone.now()
    )
    name = Host.objects.filter(pk=host_id).values_list("name", flat=True).first()
    reason = f"{name} is back: its runagentd re-adopts the run"
    return [
        (
            agent_id,
            "readopted",
            {"status": str(AgentStatus.RUNNING), "reason": reason, "parent_id": rows[agent_id]},
        )
        for agent_id in lost
    ]
