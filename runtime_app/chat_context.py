"""What the L1 agent's prompts are made of, read from the database: the facts behind a
turn's {{...}} variables and the report of a finished child (agentsys.chat.reports)."""

from __future__ import annotations

from pathlib import Path

from django.db.models import Count, Q

from agents_app.models import Agent
from agentsys.types import LIVE_AGENT_STATUSES, AgentRole, EntryType
from scheduler_app.runs import log_reader as run_log_reader
from sessions_app.models import ChatMessage, ChatSession, ChatTurn

HISTORY_MESSAGES = 10
MEMORIES = 20
RECENT_DONE_CHILDREN = 5
TAIL_BYTES = 16_000


def _tail(path: Path, limit: int = TAIL_BYTES) -> str:
    try:
        with path.open("rb") as handle:
            handle.seek(0, 2)
            handle.seek(max(0, handle.tell() - limit))
            return handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def prompt_facts(session: ChatSession, turn: ChatTurn, agent_id: str) -> dict:
    history = list(
        ChatMessage.objects.filter(session=session)
        .exclude(pk=turn.user_message_id)
        .order_by("-seq")
        .values("role", "content")[:HISTORY_MESSAGES]
    )[::-1]
    mine = Agent.objects.filter(Q(parent_id=agent_id) | Q(chat_session=session)).exclude(
        role=AgentRole.ORCHESTRATOR
    )
    mine = mine.filter(Q(parent_id=agent_id) | Q(parent__isnull=True))
    active = list(mine.filter(status__in=LIVE_AGENT_STATUSES).order_by("-created_at")[:20])
    ended = list(
        mine.exclude(status__in=LIVE_AGENT_STATUSES).order_by("-finished_at")[:RECENT_DONE_CHILDREN]
    )
    children = [
        {
            "id": a.id,
            "kind": "research loop" if "research" in a.cls_path else "command",
            "status": a.status,
            "goal": a.goal,
            "iteration": a.iteration,
        }
        for a in active + ended
    ]
    return {
        "history": history,
        "children": children,
        "memories": _reflections(session),
        "experiment_context": _experiment_facts(session),
    }


def _reflections(session: ChatSession) -> list[str]:
    from memory_app.models import MemoryEntry

    entries = MemoryEntry.objects.filter(
        type=EntryType.REFLECTION, active=True, project=session.project or "default"
    ).order_by("-created_at")[:MEMORIES]
    texts = []
    for entry in entries:
        data = entry.data if isinstance(entry.data, dict) else {}
        text = data.get("text") or data.get("content") or data.get("reflection") or ""
        if isinstance(text, str) and text.strip():
            texts.append(text.strip())
    return texts


def _experiment_facts(session: ChatSession) -> dict:
    from scheduler_app.models import Alert, AlertStatus, Run

    runs = Run.objects.filter(chat_session=session)
    counts = dict(runs.values_list("status").annotate(n=Count("id")))
    failures = runs.filter(status="failed").order_by("-finished_at")[:3]
    agent_ids = Agent.objects.filter(chat_session=session).values_list("id", flat=True)
    alerts = Alert.objects.filter(
        status=AlertStatus.PENDING, agent_id__in=list(agent_ids)
    ).order_by("-created_at")[:5]
    return {
        "running": counts.get("running", 0),
        "queued": counts.get("queued", 0),
        "done": counts.get("done", 0),
        "failed": counts.get("failed", 0),
        "recent_failures": [
            {"id": r.id, "name": r.name, "error": r.error or f"exit code {r.exit_code}"}
            for r in failures
        ],
        "open_alerts": [{"severity": a.severity, "message": a.message} for a in alerts],
    }


MAX_REPORTED_SERIES = 30


def _metrics_of(run) -> list[dict]:
    """Each of the run's series in a line's worth: whatever source it came from (TensorBoard,
    MLflow, W&B, printed lines, agent_metrics.jsonl)."""
    return [
        {
            "key": s.key,
            "source": s.source,
            "points": s.points,
            "last_step": s.last_step,
            "last": s.last_value,
            "min": s.min_value,
            "max": s.max_value,
            "non_finite": s.non_finite,
        }
        for s in run.metric_series.order_by("key")[:MAX_REPORTED_SERIES]
    ]


def child_report(agent_id: str) -> dict:
    agent = Agent.objects.filter(pk=agent_id).first()
    if agent is None:
        return {}
    report = {
        "id": agent.id,
        "kind": "research loop" if "research" in agent.cls_path else "command",
        "status": agent.status,
        "goal": agent.goal,
        "error": agent.error,
    }
    from research_app.models import ResearchLoop

    loop = ResearchLoop.objects.filter(agent_id=agent_id).first()
    if loop is not None:
        from research_app.selectors import branch_of, iteration_log_path

        report["iterations"] = loop.iteration
        report["reflection"] = loop.reflection
        log = iteration_log_path(loop)
        report["iteration_log"] = _tail(log) if log else ""
        if branch_of(loop)["branch"]:  # the chat model can tell the person how to merge it
            report["branch"] = {
                k: branch_of(loop)[k] for k in ("branch", "base_commit", "merge_command")
            }
    run = agent.runs.first()
    if run is not None:
        report["exit_code"] = run.exit_code
        # From the database when the run ran on a host whose disk this one cannot see.
        report["log_tail"] = run_log_reader.tail_text(run, 3000)
        report["metrics"] = _metrics_of(run)
        report["logged_params"] = dict(run.logged_params or {})
        report["tracker_urls"] = dict(run.tracker_urls or {})
    return report
