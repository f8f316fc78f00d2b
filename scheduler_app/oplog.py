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
    if not logger.isEnabledFor(logging.INFO):  # the query below is only for this line
        return
    from scheduler_app.models import Run

    run = (
        Run.objects.filter(agent_id=agent_id)
        .values("id", "name", "agent__schedule_request__gpu_indices")
        .annotate(host_name=F("agent__schedule_request__host__name"))
        .first()
    )
    if run is None:
        return
    gpus = ",".join(str(i) for i in run["agent__schedule_request__gpu_indices"] or []) or "none"
    where = f"on {run['host_name'] or '?'}, GPUs {gpus}"
    if status == "running":
        logger.info("run %s (%s) started %s", run["id"], run["name"], where)
        return
    code = "no exit code" if exit_code is None else f"exit code {exit_code}"
    reason = f": {error.splitlines()[0][:200]}" if error else ""
    logger.info("run %s (%s) %s with %s %s%s", run["id"], run["name"], status, code, where, reason)


def agent_moved(agent, *, old: str, new: str) -> None:
    if old == new:  # a re-adopted agent reporting its new pid: no state changed
        return
    logger.info("agent %s (%s) %s -> %s", agent.id, agent.role, old, new)


def alert_raised(alert) -> None:
    logger.warning(
        "alert %s (%s) from %s: %s", alert.id, alert.severity, alert.agent_id, alert.message
    )
