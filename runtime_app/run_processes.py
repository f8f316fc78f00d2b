"""A run's processes as the operating system sees them, through its run directory's job.pid
(agentsys.run_dir; the run leads its own session). What `serve` counts at shutdown and
what `manage.py runs stop` ends when no runagentd is there to do it."""

from __future__ import annotations

import signal
from dataclasses import dataclass
from pathlib import Path

from django.db.models import QuerySet

from agentsys import process_session
from agentsys.proctree import is_running, process_info
from agentsys.run_dir import read_pid_file, record_terminated
from agentsys.types import AgentStatus
from runtime_app.runtime_store import DjangoRuntimeStore
from scheduler_app.models import Run, RunStatus

TERM_GRACE_SECONDS = 5.0


@dataclass(frozen=True)
class LiveRun:
    run: Run
    pid: int


def run_pid(run: Run) -> int | None:
    """The pid of the run's command while that very process lives, else None."""
    if not run.run_dir:
        return None
    recorded = read_pid_file(Path(run.run_dir))
    if recorded is None:
        return None
    pid, started = recorded
    if not is_running(pid, started):
        return None  # ended, and the pid may since belong to another process
    return pid


def running_runs() -> QuerySet[Run]:
    return Run.objects.filter(status__in=RunStatus.live()).order_by("created_at")


def live_runs() -> list[LiveRun]:
    """Runs recorded as running whose command is still alive."""
    return [LiveRun(run, pid) for run in running_runs() if (pid := run_pid(run)) is not None]


def kill_and_mark_stopped(run: Run, *, reason: str) -> bool:
    """End the run's whole session (SIGTERM, then SIGKILL) and record it stopped, as its
    executor would have. For when no runagentd is there to do it. True if it was alive."""
    pid = run_pid(run)
    if pid is not None:
        started = info.start_time if (info := process_info(pid)) else 0
        process_session.kill_session(pid, started, signal.SIGTERM)
        if not process_session.wait_session_empty(pid, started, TERM_GRACE_SECONDS):
            process_session.kill_session(pid, started, signal.SIGKILL)
            process_session.wait_session_empty(pid, started, TERM_GRACE_SECONDS)
        record_terminated(Path(run.run_dir))  # a runagentd adopting it later sees it ended
    if run.agent_id:
        DjangoRuntimeStore().transition(
            agent_id=run.agent_id,
            status=AgentStatus.STOPPED,
            kind=str(AgentStatus.STOPPED),
            payload={"stopped_by": reason},
        )
    return pid is not None
