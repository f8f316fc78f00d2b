"""Runs: commands a person or a script launches (design doc jobs.json). Starting a run
queues an ExecutorAgent for it; the run's status then follows that agent."""

from __future__ import annotations

import re

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agents_app.models import Agent
from agentsys.types import AgentStatus, RequestStatus, new_agent_id
from researchagent.ids import create_with_unique_id
from scheduler_app import oplog, queue
from scheduler_app.models import Run, RunStatus, ScheduleRequest

EXECUTOR = "agentsys.agents.executor.ExecutorAgent"
STARTABLE = {RunStatus.READY}
RESTARTABLE = {RunStatus.FINISHED, RunStatus.FAILED, RunStatus.STOPPED, RunStatus.LOST}


_EXIT_CODE = re.compile(r"exited with code (-?\d+)")


class RunRefused(Exception):
    """The run cannot do that now (the message says why)."""


@transaction.atomic
def create_run(
    *,
    name: str,
    command: str,
    workdir: str = "",
    gpu_required: int = 0,
    params: dict | None = None,
    sweep_id: str | None = None,
    chat_session_id: str | None = None,
    auto_start: bool = False,
    executor_options: dict | None = None,
) -> Run:
    queue.validate_gpu_required(gpu_required)
    run = Run.objects.create(
        name=name,
        command=command,
        workdir=workdir or str(settings.AGENTSYS_WORKDIR),
        gpu_required=gpu_required,
        params=params or {},
        executor_options=executor_options or {},
        sweep_id=sweep_id,
        chat_session_id=chat_session_id,
        auto_start=auto_start,
    )
    return start_run(run_id=run.id) if auto_start else run


@transaction.atomic
def start_run(*, run_id: str) -> Run:
    """Queue an ExecutorAgent for the run. Its `executor_options` (retries, thresholds,
    backend) go into the executor's config; the run's own fields (command, workdir, params,
    GPUs) always win over them."""
    run = Run.objects.select_for_update().get(pk=run_id)
    if run.status not in STARTABLE:
        raise RunRefused(
            f"{run_id} is {run.status}; only a ready run can be started "
            "(use rerun for a finished one)"
        )
    agent = create_with_unique_id(
        Agent,
        lambda: new_agent_id("executor"),
        role="executor",
        cls_path=EXECUTOR,
        goal=run.name,
        config={
            **run.executor_options,
            "command": run.command,
            "workdir": run.workdir,
            "params": run.params,
            "gpu_required": run.gpu_required,
            "run_id": run.id,
        },
        project=settings.AGENTSYS.project,
        run=run.id,
        chat_session_id=run.chat_session_id,
    )
    request = queue.submit(agent=agent, gpu_required=run.gpu_required)
    run.agent = agent
    run.run_dir = f"{run.workdir}/.agents/runs/{agent.id}"
    if request.status == RequestStatus.REJECTED:
        run.status, run.error, run.finished_at = (
            RunStatus.FAILED,
            request.rejection_reason,
            timezone.now(),
        )
    else:
        run.status = RunStatus.QUEUED
    run.save()
    oplog.run_queued(run)
    return run


@transaction.atomic
def rerun(*, run_id: str) -> Run:
    """A finished run again, as a new run with the same command (the old one stays)."""
    old = Run.objects.get(pk=run_id)
    if old.status not in RESTARTABLE:
        raise RunRefused(f"{run_id} is {old.status}; only a finished run can be rerun")
    return create_run(
        name=old.name,
        command=old.command,
        workdir=old.workdir,
        gpu_required=old.gpu_required,
        params=old.params,
        executor_options=old.executor_options,
        sweep_id=old.sweep_id,
        chat_session_id=old.chat_session_id,
        auto_start=True,
    )


def stop_run(*, run_id: str):
    """Queued: cancelled at once. Running: its executor is stopped (runagentd kills the
    command's whole process group). Anything else: refused."""
    from agents_app.services import request_agent_command
    from agentsys.types import CommandKind

    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run_id)
        if run.status == RunStatus.QUEUED:
            ScheduleRequest.objects.filter(agent=run.agent, status=RequestStatus.QUEUED).update(
                status=RequestStatus.CANCELLED, finished_at=timezone.now()
            )
            Agent.objects.filter(pk=run.agent_id).update(
                status=AgentStatus.STOPPED, finished_at=timezone.now()
            )
            run.status, run.finished_at = RunStatus.STOPPED, timezone.now()
            run.save(update_fields=["status", "finished_at"])
            return run
        if run.status != RunStatus.RUNNING:
            raise RunRefused(f"{run_id} is {run.status}; only a queued or running run can stop")
    request_agent_command(agent_id=run.agent_id, kind=CommandKind.STOP)
    return run


_RUN_STATUS_FOR_AGENT = {
    AgentStatus.RUNNING: RunStatus.RUNNING,
    AgentStatus.DONE: RunStatus.FINISHED,
    AgentStatus.FAILED: RunStatus.FAILED,
    AgentStatus.STOPPED: RunStatus.STOPPED,
}


def follow_agent(*, agent_id: str, status: AgentStatus, result=None, error: str = "") -> None:
    """Keep a run in step with its executor (called in the agent's status transaction)."""
    run_status = _RUN_STATUS_FOR_AGENT.get(status)
    if run_status is None:
        return
    fields = {"status": run_status}
    now = timezone.now()
    if status == AgentStatus.RUNNING:
        fields["started_at"] = now
    else:
        fields["finished_at"] = now
        exit_code = (result or {}).get("exit_code") if isinstance(result, dict) else None
        if exit_code is None and (code := _EXIT_CODE.search(error)):
            exit_code = int(code.group(1))
        if "lost:" in error:
            fields["status"] = RunStatus.LOST
        fields.update(exit_code=exit_code, error=error)
    Run.objects.filter(agent_id=agent_id).update(**fields)
    oplog.run_moved(
        agent_id=agent_id,
        status=fields["status"],
        exit_code=fields.get("exit_code"),
        error=fields.get("error", ""),
    )
