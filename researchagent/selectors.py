"""Cross-app read models for the overview page: what runs, what waits, what needs a person."""

from __future__ import annotations

from django.db.models import Count, Max

from agents_app import selectors as agent_selectors
from agentsys.types import LIVE_AGENT_STATUSES
from research_app import selectors as research_selectors
from research_app.models import ResearchLoop
from scheduler_app import queue_board
from scheduler_app import selectors as run_selectors
from scheduler_app.hosts.board import host_cards
from scheduler_app.models import Alert, AlertStatus, MetricSeries, RunStatus

SHOWN = 8


def _running_runs() -> list:
    """Running runs, each with `.last_step`: the furthest step any of its series reached."""
    runs = run_selectors.run_list(status=RunStatus.RUNNING, limit=SHOWN)
    last = dict(
        MetricSeries.objects.filter(run__in=runs)
        .order_by()
        .values_list("run_id")
        .annotate(step=Max("last_step"))
        .values_list("run_id", "step")
    )
    for run in runs:
        run.last_step = last.get(run.pk)
    return runs


def system_overview() -> dict:
    runs_by_status = dict(
        run_selectors.Run.objects.order_by().values_list("status").annotate(n=Count("id"))
    )
    board_hosts = host_cards()
    queue = queue_board.queue_rows(board_hosts, limit=5)
    loops = ResearchLoop.objects.select_related("agent").filter(
        agent__status__in=LIVE_AGENT_STATUSES
    )
    open_alerts = Alert.objects.filter(status=AlertStatus.PENDING)
    return {
        "counts": {
            "agents_live": agent_selectors.working_agents().count(),
            "runs_running": runs_by_status.get(RunStatus.RUNNING, 0),
            "runs_queued": runs_by_status.get(RunStatus.QUEUED, 0),
            "alerts_open": open_alerts.count(),
            # Of the hosts that say they are up: a dead host's GPUs are no one's to use.
            "gpus_busy": sum(h.busy for h in board_hosts if h.state in ("online", "silent")),
            "gpus_total": sum(h.total for h in board_hosts if h.state in ("online", "silent")),
        },
        "hosts": board_hosts,
        "queue": queue,
        "running_runs": _running_runs(),
        "open_alerts": list(open_alerts.select_related("run")[:SHOWN]),
        "loops": [
            research_selectors.summary(loop) for loop in loops.order_by("-created_at")[:SHOWN]
        ],
    }
