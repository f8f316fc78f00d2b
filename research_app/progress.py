"""How far a research loop has got, in a line a person reads where the loop was started (the
chat's action card): its state, iterations done, its experiments ended of those started, and
the best loss any of them has logged so far."""

from __future__ import annotations

import math

from django.db.models import Count, Q

from agentsys.types import TERMINAL_AGENT_STATUSES, EndState
from research_app import selectors
from research_app.approvals import approval_sent, caps_of, open_approval
from research_app.questions import answer_sent, open_question
from scheduler_app.models import MetricSeries, Run
from scheduler_app.selectors import LOSS_KEYS

# A run the loop ran beside its comparison (a check, another way of logging the same training)
# says so in its experiment's goal, which names the run (skills/wild_v2_iteration): its loss
# may be as low as the best one's, but it is no one's best run.
NOT_COMPARED = "not compared"


def loop_progress(agent_id: str) -> dict | None:
    loop = selectors.loop(agent_id)
    if loop is None:
        return None
    status = loop.agent.status
    runs = {"total": 0, "ended": 0}
    if loop.sweep_id:  # a loop saved before it had a sweep has no runs to count
        runs = Run.objects.filter(sweep_id=loop.sweep_id).aggregate(
            total=Count("id"), ended=Count("id", filter=Q(status__in=[s.value for s in EndState]))
        )
    phase = str(loop.state.get("phase") or "")
    question = open_question(loop)
    approval = open_approval(loop)
    return {
        "id": loop.agent_id,
        "status": status,
        "state": selectors.state_words(
            status,
            phase,
            loop.iteration,
            stopping=selectors.stop_pending(loop),
            asking=bool(question),
            at_cap=bool(approval),
        ),
        "question": question,
        "approval": approval,
        "approval_sent": bool(approval) and approval_sent(loop),
        "caps": caps_of(loop) if approval.get("kind") != "batch" else {},
        "answer_sent": bool(question) and answer_sent(loop),
        "live": status not in TERMINAL_AGENT_STATUSES,
        "iteration": loop.iteration,
        "max_iterations": int(loop.settings.get("max_iterations") or 0),
        "runs_total": runs["total"],
        "runs_ended": runs["ended"],
        "best": best_loss(loop.sweep_id, compared_only=True) if loop.sweep_id else None,
        # What woke it last while others of its runs went on (agentsys.research.experiments).
        "woke": str(loop.state.get("woke") or "") if loop.state.get("running") else "",
        "still_running": len(loop.state.get("running") or []),
    }


def best_loss(sweep_id: str, *, compared_only: bool = False) -> dict | None:
    """The lowest last value of the first loss key (scheduler_app's order) any run logged;
    NaN and infinities are no one's best. `compared_only`: of the runs in the loop's
    comparison (NOT_COMPARED). One indexed read a key, at most four."""
    for key in LOSS_KEYS:
        series = MetricSeries.objects.filter(
            run__sweep_id=sweep_id,
            key=key,
            last_value__gt=-math.inf,
            last_value__lt=math.inf,  # PostgreSQL sorts NaN above infinity
        )
        if compared_only:
            series = series.exclude(run__name__icontains=NOT_COMPARED)
        found = series.order_by("last_value").values("last_value", "run_id", "run__name").first()
        if found:
            return {
                "key": key,
                "value": found["last_value"],
                "run_id": found["run_id"],
                "run_name": found["run__name"],
            }
    return None
