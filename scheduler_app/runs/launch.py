"""Runs: commands a person or a script launches. Starting a run
queues an ExecutorAgent for it; the run's status then moves with that agent and its queue
request (scheduler_app.queue.lifecycle)."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agents_app.services import create_agent
from agentsys.run_dir import run_dir_of
from common.ids import insert_with_drawn_ids
from scheduler_app import oplog
from scheduler_app.models import Run, RunStatus, ScheduleRequest, Sweep
from scheduler_app.queue import claims as queue
from scheduler_app.queue import lifecycle
from scheduler_app.runs import batch as run_batch
from scheduler_app.runs import code as run_code
from scheduler_app.runs.executor import executor_of

# Never started (a cancelled run never ran; a rejected one may fit a host that joined since).
STARTABLE = {RunStatus.READY, RunStatus.CANCELLED, RunStatus.REJECTED}
RESTARTABLE = {
    RunStatus.DONE,
    RunStatus.FAILED,
    RunStatus.STOPPED,
    RunStatus.CANCELLED,
    RunStatus.REJECTED,
    RunStatus.LOST,
}


class RunRefused(Exception):
    """The run cannot do that now (the message says why)."""


def create_run(
    *,
    name: str,
    command: str,
    workdir: str = "",
    gpu_required: int = 0,
    requires: dict | None = None,
    params: dict | None = None,
    sweep_id: str | None = None,
    chat_session_id: str | None = None,
    auto_start: bool = False,
    executor_options: dict | None = None,
    created_by_agent: str = "",
    created_by=None,
    code: dict | None = None,
    code_fallback: run_code.RecordedCode = run_code.NOTHING,
) -> Run:
    """A new run. Its code is recorded here when this host sees its workdir (its git commit
    and uncommitted changes), or is the `code` a script sent ({commit, remote, patch}); a
    rerun whose workdir is not seen here keeps its run's (`code_fallback`)."""
    queue.validate_gpu_required(gpu_required)
    workdir = workdir or str(settings.AGENTSYS_WORKDIR)
    try:
        recorded = run_code.from_request(code) if code else None
    except run_code.CodeRefused as error:
        raise queue.InvalidRequest(str(error)) from None
    if recorded is None:  # the git runs before the transaction holds anything
        recorded = run_code.take_here(workdir, host=settings.AGENTSYS.host_name)
        if not recorded.host:
            recorded = code_fallback
    item = {
        "name": name,
        "command": command,
        "workdir": workdir,
        "gpu_required": gpu_required,
        "requires": requires,
        "params": params,
        "sweep_id": sweep_id,
        "chat_session_id": chat_session_id,
        "auto_start": auto_start,
        "executor_options": executor_options,
        "created_by": created_by,
    }

    # The batch's insert: the rows start_run would leave, in half its round trips (issue 25).
    def insert() -> Run:
        _check_references(sweep_id=sweep_id, chat_session_id=chat_session_id)
        (made,) = run_batch.insert_runs([item], [recorded], created_by_agent=created_by_agent)
        return made

    run = insert_with_drawn_ids(insert)
    if run.agent_id:
        oplog.run_queued(run)
    return run


def record_tracking(*, run_id: str, params: dict, urls: dict) -> bool:
    """What a run's script logged about itself (MLflow params and tags, W&B config,
    TensorBoard hparams) and the online tracker runs it printed; False when the run is gone.
    The latest read replaces the earlier one: the sources keep all they have found."""
    # updated_at too: update() leaves it, and the sweep table's param columns follow it.
    fields = {"logged_params": params, "tracker_urls": urls, "updated_at": timezone.now()}
    return bool(Run.objects.filter(pk=run_id).update(**fields))


def record_stopped_by(*, run_id: str, words: str) -> bool:
    """The stop rule that is ending the run, and the value that met it (agentsys.stop_rules),
    written before its executor stops it, so the run is never seen `stopped` without it.
    False when the run is gone or has already ended."""
    rows = Run.objects.filter(pk=run_id, status__in=RunStatus.open())
    return bool(rows.update(stopped_by=words[:2000], updated_at=timezone.now()))


def record_slurm_state(*, agent_id: str, job_id: int, running: bool, reason: str) -> bool:
    """The SLURM job of the run whose executor is `agent_id`, as that executor last heard of
    it: the run stays `queued` (with SLURM's reason, e.g. Resources) until the job runs.
    False when it has no run."""
    now = timezone.now()
    fields = {"slurm_job_id": job_id, "wait_reason": "" if running else reason[:200]}
    rows = Run.objects.filter(agent_id=agent_id)
    # The start first, in one statement: it is what people wait to see.
    if running and rows.filter(status=RunStatus.QUEUED).update(
        **fields, status=RunStatus.RUNNING, started_at=now, updated_at=now
    ):
        # Its log line's reads after the commit: the row is seen running that much sooner.
        transaction.on_commit(
            lambda: oplog.run_moved(
                agent_id=agent_id, status=RunStatus.RUNNING, exit_code=None, error=""
            )
        )
        return True
    return bool(rows.update(**fields, updated_at=now))


def _check_references(*, sweep_id: str | None, chat_session_id: str | None) -> None:
    """A run naming a sweep or chat that does not exist is the caller's mistake, said before
    the insert (the foreign key would only fail at commit, as a server error)."""
    # The chat model through the foreign key: the chat app sits above this one.
    chat_sessions = Run._meta.get_field("chat_session").related_model.objects
    if sweep_id is not None and not Sweep.objects.filter(pk=sweep_id).exists():
        raise queue.InvalidRequest(f"sweep_id: no sweep {sweep_id!r}")
    if chat_session_id is not None and not chat_sessions.filter(pk=chat_session_id).exists():
        raise queue.InvalidRequest(f"chat_session_id: no chat session {chat_session_id!r}")


@transaction.atomic
def start_run(*, run_id: str) -> Run:
    """Queue an ExecutorAgent for the run (executor_of says its config)."""
    run = Run.objects.select_for_update().get(pk=run_id)
    if run.status not in STARTABLE:
        raise RunRefused(
            f"{run_id} is {run.status}; only a run that never started (ready, cancelled, "
            "rejected) can be started; use rerun for one that ran"
        )
    # Never the current directory (the checkout): a run made in the admin has no workdir.
    run.workdir = run.workdir or str(settings.AGENTSYS_WORKDIR)
    agent = create_agent(**executor_of(run))
    run.agent = agent
    run.run_dir = str(run_dir_of(run.workdir, agent.id))
    run.exit_code, run.error, run.started_at, run.finished_at = None, "", None, None
    run.stopped_by = ""
    run.save()
    queue.submit(agent=agent, gpu_required=run.gpu_required)  # the run is queued or rejected
    run.refresh_from_db()
    oplog.run_queued(run)
    return run


@transaction.atomic
def rerun(*, run_id: str, created_by_agent: str = "") -> Run:
    """A finished run again, as a new run with the same command (the old one stays); made by
    whoever reruns it."""
    old = Run.objects.get(pk=run_id)
    if old.status not in RESTARTABLE:
        raise RunRefused(f"{run_id} is {old.status}; only a finished run can be rerun")
    return create_run(
        name=old.name,
        command=old.command,
        workdir=old.workdir,
        gpu_required=old.gpu_required,
        requires=old.requires,
        params=old.params,
        executor_options=old.executor_options,
        sweep_id=old.sweep_id,
        chat_session_id=old.chat_session_id,
        auto_start=True,
        created_by_agent=created_by_agent,
        created_by=old.created_by,
        code_fallback=run_code.carried_over(old),
    )


def stop_run(*, run_id: str):
    """Queued: cancelled at once, with its request and agent. Running: its executor is
    stopped (runagentd kills the command's whole process group). Anything else: refused."""
    from agents_app.services import request_agent_command
    from agentsys.types import CommandKind

    run = Run.objects.get(pk=run_id)
    if run.status == RunStatus.QUEUED:
        with transaction.atomic():
            requests = ScheduleRequest.objects.filter(agent_id=run.agent_id)
            if run.agent_id is None:  # its agent row was deleted: the config still names it
                requests = ScheduleRequest.objects.filter(config__run_id=run.id)
            lifecycle.cancel_requests(requests, reason="stopped before it started")
        run.refresh_from_db()  # cancelled, or running if a claim took it first
    if run.status == RunStatus.CANCELLED:
        return run
    # Still queued after that: a claim took it (a SLURM run waits in SLURM's queue under a
    # running executor, which cancels its job).
    if run.status not in RunStatus.open():
        raise RunRefused(f"{run_id} is {run.status}; only a queued, running or paused run can stop")
    request_agent_command(agent_id=run.agent_id, kind=CommandKind.STOP)
    return run
