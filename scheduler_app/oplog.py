"""The lines an operator follows on the console (logger `agentsys.ops`, INFO): runs queued,
started and ended, agent state changes, alerts. One place, so their wording stays one."""

from __future__ import annotations

import logging

from django.db.models import F

logger = logging.getLogger("agentsys.ops")


def run_queued(run) -> None:
    logger.info(
        "run %s (%s) %s: needs %d GPU(s); command: %s",
        run.id,
        run.name,
        run.status,
        run.gpu_required,
        run.command[:200],
    )


def run_moved(*, agent_id: str, status: str, exit_code: int | None, error: str) -> None:
    """After a run followed its executor to `status` (same transaction)."""
    runs_moved(agent_ids=[agent_id], status=status, exit_code=exit_code, error=error)


def runs_moved(
    *, agent_ids: list[str], status: str, exit_code: int | None = None, error: str = ""
) -> None:
    """run_moved for the runs of several executors at once (a claim starts several): one
    query for all their lines."""
    if not agent_ids or not logger.isEnabledFor(logging.INFO):  # the query is for the lines
        return
    from scheduler_app.models import Run

    found = (
        Run.objects.filter(agent_id__in=agent_ids)
        .order_by("created_at")
        .values("id", "name", "agent__schedule_request__gpu_indices")
        .annotate(host_name=F("agent__schedule_request__host__name"))
    )
    for run in found:
        gpus = ",".join(str(i) for i in run["agent__schedule_request__gpu_indices"] or [])
        where = f"on {run['host_name'] or '?'}, GPUs {gpus or 'none'}"
        if status == "running":
            logger.info("run %s (%s) started %s", run["id"], run["name"], where)
            continue
        code = "no exit code" if exit_code is None else f"exit code {exit_code}"
        reason = f": {error.splitlines()[0][:200]}" if error else ""
        logger.info(
            "run %s (%s) %s with %s %s%s", run["id"], run["name"], status, code, where, reason
        )


def agent_moved(agent, *, old: str, new: str) -> None:
    if old == new:  # a re-adopted agent reporting its new pid: no state changed
        return
    logger.info("agent %s (%s) %s -> %s", agent.id, agent.role, old, new)


def alert_raised(alert) -> None:
    logger.warning(
        "alert %s (%s) from %s: %s", alert.id, alert.severity, alert.agent_id, alert.message
    )
