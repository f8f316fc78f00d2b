"""A run's GPU time goes to the ledger (ledger_app) as it ends, in the transaction of its end
(lifecycle.follow_agent): the GPUs it held times the time from their claim to their release;
for a SLURM run, the GPUs it asked for times the time its job ran (from SLURM's start, which
runs.launch.record_slurm_state recorded, to its end)."""

from __future__ import annotations

from datetime import datetime

from agentsys.types import AgentRole
from ledger_app.services import record_run_gpu
from scheduler_app.models import Run, RunStatus, ScheduleRequest
from scheduler_app.queue import claims as queue

FIELDS = (
    "id",
    "gpu_required",
    "started_at",
    "sweep_id",
    "chat_session_id",
    "created_by_id",
    "sweep__created_by_id",
    "chat_session__owner_id",
    "agent__parent_id",
    "agent__parent__role",
    "agent__host__name",
)


def ending_runs(agent_id: str) -> list[dict]:
    """The open runs of executor `agent_id`, read before their end is written."""
    return list(Run.objects.filter(agent_id=agent_id, status__in=RunStatus.open()).values(*FIELDS))


def record_run_ends(
    runs: list[dict], *, agent_id: str, request: ScheduleRequest | None, now: datetime
) -> None:
    for run in runs:
        if request is not None and request.backend != queue.SLURM and request.started_at:
            gpus, started = len(request.gpu_indices or []), request.started_at
        else:  # SLURM's job, or a run whose request had closed already
            gpus, started = run["gpu_required"], run["started_at"]
        parent = run["agent__parent_id"] or ""
        record_run_gpu(
            run_id=run["id"],
            gpus=gpus,
            started=started,
            ended=now,
            host=run["agent__host__name"] or "",
            agent_id=agent_id,
            sweep_id=run["sweep_id"] or "",
            loop_id=parent if run["agent__parent__role"] == AgentRole.RESEARCH else "",
            chat_session_id=run["chat_session_id"] or "",
            # Whose it is, as fair share reads it (queue.accounts): its maker, else its sweep's.
            user_id=run["created_by_id"]
            or run["sweep__created_by_id"]
            or run["chat_session__owner_id"],
        )


def held_gpu_hours(loop_id: str, now: datetime) -> float:
    """GPU-hours research loop `loop_id`'s runs have held so far and not yet ended (the
    ledger has a run's time once it ends): what a budget counts while they run."""
    running = Run.objects.filter(
        agent__parent_id=loop_id, status__in=RunStatus.open(), started_at__isnull=False
    ).values_list("gpu_required", "started_at")
    return sum(gpus * max((now - started).total_seconds(), 0.0) for gpus, started in running) / 3600
