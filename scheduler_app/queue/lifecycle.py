"""An executor, its queue request and its run change state together.

Whatever moves one of them (the claim, the executor's start and end, a cancel from the API,
the admin or a stopped parent, a deleted agent, a host declared dead) goes through a function
here, inside one transaction, so no reader ever sees a run `queued` behind a `cancelled`
request or a `done` request under a run that says something else. Once it ends, all three say
the same word (agentsys.types.EndState). `claims.submit` (queued or rejected; for a batch of
runs, `runs.batch.create_runs` writes the same three rows at once) and `claims.claim`
(running, in its placement statement) are the other two.
"""

from __future__ import annotations

import re

from django.db import transaction
from django.db.models import F, Q, QuerySet, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from agents_app.models import Agent
from agentsys.types import OPEN_REQUEST_STATUSES, AgentStatus, EndState, RequestStatus
from events_app.events import AGENTS_STREAM, record_event
from scheduler_app import oplog
from scheduler_app.models import Run, RunStatus, ScheduleRequest
from scheduler_app.queue import claims as queue
from scheduler_app.queue import spend
from scheduler_app.run_news import runs_changed, runs_of_agents_changed

_EXIT_CODE = re.compile(r"exited with code (-?\d+)")
# How a SLURM run's executor begins its error when sbatch refused the job (it can never run
# as asked: more GPUs than any node has, an unknown partition).
REFUSED_BY_SLURM = "RunRefusedBySlurm: "


def end_state(status: AgentStatus, *, error: str = "", started: bool = True) -> EndState:
    """The word an executor's end gives it, its request and its run. A stop that came before
    it ever started is a cancel; a run that left no exit code is lost, not merely failed."""
    if status == AgentStatus.STOPPED and not started:
        return EndState.CANCELLED
    if status == AgentStatus.FAILED and "lost:" in error:
        return EndState.LOST
    if status == AgentStatus.FAILED and error.startswith(REFUSED_BY_SLURM):
        return EndState.REJECTED
    return EndState(status.value)


def follow_agent(
    *,
    agent_id: str,
    status: AgentStatus,
    result=None,
    error: str = "",
    previous: AgentStatus | None = None,
    backend: str | None = None,
) -> AgentStatus:
    """The agent `agent_id` moves to `status` (called in its status transaction, its row
    locked): its request and its run, if it has them, move with it. Returns the status the
    agent itself must take (see end_state); for an agent with neither, `status`. `backend`:
    its request's (queue.route), when the caller knows it."""
    status = AgentStatus(status)
    now = timezone.now()
    if status == AgentStatus.RUNNING:
        # A SLURM run's executor starts at once; the run starts when SLURM runs its job
        # (runs.record_slurm_state).
        runs = Run.objects.filter(agent_id=agent_id, status__in=RunStatus.open())
        if backend is None:  # not known: its request says (a join: ~1 ms of every start)
            runs = runs.exclude(
                status=RunStatus.QUEUED, agent__schedule_request__backend=queue.SLURM
            )
        elif backend == queue.SLURM:
            runs = runs.exclude(status=RunStatus.QUEUED)
        if runs.update(status=RunStatus.RUNNING, started_at=Coalesce(F("started_at"), Value(now))):
            runs_of_agents_changed([agent_id])
        if previous == AgentStatus.IDLE:  # a first start: not a resume, nor a re-adoption
            oplog.run_moved(agent_id=agent_id, status=RunStatus.RUNNING, exit_code=None, error="")
        return status
    if status == AgentStatus.PAUSED:  # its executor suspended the run's processes
        Run.objects.filter(agent_id=agent_id, status=RunStatus.RUNNING).update(
            status=RunStatus.PAUSED
        )
        return status
    if not status.is_terminal:
        return status
    request = (
        ScheduleRequest.objects.select_for_update()
        .filter(agent_id=agent_id, status__in=OPEN_REQUEST_STATUSES)
        .first()
    )
    started = request is None or request.status == RequestStatus.RUNNING
    if started and request is not None and request.backend == queue.SLURM:
        # Claimed, but SLURM never ran its job: stopping it withdraws it.
        started = Run.objects.filter(agent_id=agent_id).exclude(status=RunStatus.QUEUED).exists()
    word = end_state(status, error=error, started=started)
    if (
        word == EndState.LOST
        and request is None
        and not Run.objects.filter(agent_id=agent_id).exists()
    ):
        word = EndState.FAILED  # only a run is lost; any other agent that failed, failed
    if request is not None:
        queue.end_request(request.id, status=word, now=now)
    exit_code = result.get("exit_code") if isinstance(result, dict) else None
    if exit_code is None and (code := _EXIT_CODE.search(error)):
        exit_code = int(code.group(1))
    ending = spend.ending_runs(agent_id)
    ended = Run.objects.filter(agent_id=agent_id, status__in=RunStatus.open()).update(
        status=word, finished_at=now, exit_code=exit_code, error=error
    )
    spend.record_run_ends(ending, agent_id=agent_id, request=request, now=now)
    if ended:
        runs_of_agents_changed([agent_id])  # its waiters (wait_runs) hear of it at commit
        oplog.run_moved(agent_id=agent_id, status=word, exit_code=exit_code, error=error)
    return AgentStatus(word.value)


def cancel_requests(
    requests: QuerySet[ScheduleRequest], *, reason: str = "", publish_live: bool = True
) -> list[str]:
    """Withdraw the queued ones of `requests`: each, its agent and its run become `cancelled`
    together, and the agent's `cancelled` event is recorded. Returns the ids cancelled; one
    no longer queued (a claim took it first) is left alone. Call inside a transaction."""
    return cancel_requests_and_events(requests, reason=reason, publish_live=publish_live)[0]


def cancel_requests_and_events(
    requests: QuerySet[ScheduleRequest], *, reason: str = "", publish_live: bool = True
) -> tuple[list[str], list[dict]]:
    """cancel_requests, also returning the `cancelled` events it recorded (as messages).
    runagentd passes publish_live=False and publishes them from its own event loop (see
    events_app.events.record_event): the caller must, or live clients see them late."""
    rows = list(
        requests.select_for_update(of=("self",))
        .filter(status=RequestStatus.QUEUED)
        .order_by("created_at", "id")
        .values_list("id", "agent_id", "parent_id", "config")
    )
    if not rows:
        return [], []
    now = timezone.now()
    ids = [row[0] for row in rows]
    ScheduleRequest.objects.filter(pk__in=ids).update(
        status=RequestStatus.CANCELLED, finished_at=now, rejection_reason=reason
    )
    agent_ids = [agent_id for _, agent_id, _, _ in rows if agent_id]
    cancelled_agents = set(
        Agent.objects.filter(pk__in=agent_ids, status=AgentStatus.IDLE).values_list("pk", flat=True)
    )
    Agent.objects.filter(pk__in=cancelled_agents).update(
        status=AgentStatus.CANCELLED, finished_at=now, error=reason
    )
    # A run names its agent; one whose agent row was deleted is still named in the config.
    run_ids = [config.get("run_id") for *_, config in rows if isinstance(config, dict)]
    cancelled = Run.objects.filter(
        Q(agent_id__in=agent_ids) | Q(pk__in=[r for r in run_ids if isinstance(r, str)]),
        status=RunStatus.QUEUED,
    )
    runs_changed(list(cancelled.values_list("pk", flat=True)))  # delivered at commit
    cancelled.update(status=RunStatus.CANCELLED, finished_at=now, error=reason)
    queue.notify_queue()  # a reserving policy may have held GPUs for one of them
    events = []
    for request_id, agent_id, parent_id, _ in rows:
        if agent_id in cancelled_agents:
            event = record_event(
                stream=AGENTS_STREAM,
                kind=str(AgentStatus.CANCELLED),
                agent_id=agent_id,
                payload={
                    "status": str(AgentStatus.CANCELLED),
                    "request_id": request_id,
                    "parent_id": parent_id,
                    "reason": reason,
                },
                publish_live=publish_live,
            )
            events.append(event.as_message())
    return ids, events


AGENT_GONE = "Cancelled: its agent was deleted before it started"


def close_agentless_requests() -> int:
    """Queued requests whose agent row was deleted (admin, raw SQL) can never run: cancel
    them and their runs, so they neither count as queue nor wait forever. The claim already
    skips them."""
    agentless = ScheduleRequest.objects.filter(status=RequestStatus.QUEUED, agent__isnull=True)
    if not agentless.exists():  # every heartbeat asks: no lock, no transaction when none
        return 0
    with transaction.atomic():
        return len(cancel_requests(agentless, reason=AGENT_GONE, publish_live=False))
