"""Reads for research loops: the list, and one loop with its history joined to its runs."""

from __future__ import annotations

from pathlib import Path

from agents_app.models import AgentCommand, CommandStatus
from agentsys.research.branch import LoopBranch
from agentsys.run_dir import ITERATION_LOG_FILE, loop_dir_of
from agentsys.types import LIVE_AGENT_STATUSES, AgentStatus
from events_app.models import Event
from ledger_app.selectors import spent_of_loop
from memory_app.models import MemoryEntry
from research_app.approvals import caps_of, open_approval
from research_app.models import ResearchLoop
from research_app.questions import open_question
from scheduler_app.models import Run

HISTORY_KEYS = (
    "iteration",
    "phase",
    "promise",
    "summary",
    "files_changed",
    "errors",
    "duration_s",
    "commit",
    "tool_calls",
)


def loops(*, limit: int, offset: int, awaiting_approval: bool = False) -> list[ResearchLoop]:
    """Newest first; `awaiting_approval`: only the live ones whose state holds an open
    approval (research_app.approvals.open_approval, in the query so a page is a full one)."""
    found = ResearchLoop.objects.select_related("agent").order_by("-created_at")
    if awaiting_approval:
        found = (
            found.filter(agent__status__in=LIVE_AGENT_STATUSES, state__approval__has_key="reason")
            .exclude(state__approval__reason="")
            .exclude(state__approval__reason=None)
        )
    return list(found[offset : offset + limit])


def loop(agent_id: str) -> ResearchLoop | None:
    return ResearchLoop.objects.select_related("agent").filter(agent_id=agent_id).first()


# What a running loop is doing, from its saved phase (agentsys.research.state); any other
# status is said by itself: a stopped loop's phase is where it was when it stopped.
PHASE_WORDS = {
    "planning": "planning",
    "iterating": "running iteration {next}",
    "reflecting": "reflecting on its results",
    "ended": "finishing",
}


def state_words(
    status: str,
    phase: str,
    iteration: int,
    *,
    stopping: bool = False,
    asking: bool = False,
    at_cap: bool = False,
) -> str:
    """The loop's state as a person reads it in its header, never a phase it has left; an
    ended or paused loop's status as is, for the template's status_word. `asking`: a running
    loop waits for the answer to its question."""
    if status in LIVE_AGENT_STATUSES and stopping:
        return "stopping"
    if status == AgentStatus.RUNNING and at_cap:
        return "awaiting_approval"
    if status == AgentStatus.RUNNING and asking:
        return "awaiting_reply"
    if status == AgentStatus.RUNNING:
        return PHASE_WORDS.get(phase, "running").format(next=iteration + 1)
    if status == AgentStatus.IDLE:
        return "starting"
    return str(status)


def stop_pending(loop: ResearchLoop) -> bool:
    """A Stop was sent that the daemon has not carried out yet."""
    return AgentCommand.objects.filter(
        agent_id=loop.agent_id, kind="stop", status=CommandStatus.PENDING
    ).exists()


def summary(loop: ResearchLoop) -> dict:
    agent = loop.agent
    phase = str(loop.state.get("phase") or "")
    question = open_question(loop)
    approval = open_approval(loop)
    return {
        "id": loop.agent_id,
        "goal": loop.goal,
        "status": agent.status,
        "error": agent.error,
        "iteration": loop.iteration,
        "max_iterations": int(loop.settings.get("max_iterations") or 0),
        "phase": phase,
        "state": state_words(
            agent.status, phase, loop.iteration, asking=bool(question), at_cap=bool(approval)
        ),
        "question": question or None,
        "approval": approval or None,
        "budget": caps_of(loop) or None,
        "sweep_id": loop.sweep_id,
        "chat_session_id": loop.chat_session_id,
        "superseded_by": agent.superseded_by_id,
        "created_at": loop.created_at,
        "updated_at": loop.updated_at,
    }


def detail(loop: ResearchLoop) -> dict:
    history = [h for h in loop.state.get("history") or [] if isinstance(h, dict)]
    agent_ids = {i for h in history for i in h.get("runs") or [] if isinstance(i, str)}
    runs = {r.agent_id: r for r in Run.objects.filter(agent_id__in=agent_ids)}
    steps = []
    for step in history:
        item = {key: step.get(key) for key in HISTORY_KEYS}
        item["runs"] = [_run(runs.get(i), i) for i in step.get("runs") or [] if isinstance(i, str)]
        steps.append(item)
    return {
        **summary(loop),
        "plan": loop.plan,
        "reflection": loop.reflection,
        "opencode_session_id": loop.opencode_session_id,
        "settings": {**loop.settings, **(loop.state.get("settings") or {})},
        "budget_from": loop.settings.get("budget_from") or None,
        "history": steps,
        **branch_of(loop),
        "spent": spent_of_loop(
            loop.agent_id, started=loop.created_at, ended=loop.agent.finished_at
        ),
    }


def branch_of(loop: ResearchLoop) -> dict:
    """Its own branch (agentsys.research.branch) and what its commits left out; nulls for a
    loop that works in place (no repository)."""
    found = LoopBranch.from_dict(loop.state.get("branch"))
    left_out = loop.state.get("left_out") if isinstance(loop.state.get("left_out"), dict) else {}
    commands = found.commands() if found else {}
    return {
        "branch": found.name if found else None,
        "base_commit": found.base_commit if found else None,
        "worktree": found.worktree if found else None,
        "merge_command": commands.get("merge"),
        "discard_command": commands.get("discard"),
        "left_out": [{"path": str(p), "why": str(w)} for p, w in left_out.items()],
        "left_out_count": int(loop.state.get("left_out_count") or len(left_out)),
    }


def work_dir(loop: ResearchLoop) -> Path | None:
    """Where the loop works and keeps its files: its worktree's copy of the workdir, or the
    workdir itself."""
    found = LoopBranch.from_dict(loop.state.get("branch"))
    workdir = found.workdir if found else str(loop.settings.get("workdir") or "")
    return Path(workdir).resolve() if workdir else None


def _run(run: Run | None, agent_id: str) -> dict:
    if run is None:
        return {"id": None, "agent_id": agent_id, "name": "", "status": "unknown"}
    return {
        "id": run.id,
        "agent_id": agent_id,
        "name": run.name,
        "status": run.status,
        "exit_code": run.exit_code,
        "gpu_required": run.gpu_required,
    }


def iteration_log_path(loop: ResearchLoop) -> Path | None:
    """The loop's iteration_log.md, when it exists inside its workdir."""
    workdir = work_dir(loop)
    if workdir is None:
        return None
    path = (loop_dir_of(workdir, loop.agent_id) / ITERATION_LOG_FILE).resolve()
    if workdir not in path.parents or not path.is_file():
        return None
    return path


# What a person reads in a loop's timeline: its life and every command it was given.
TIMELINE_EVENTS = {
    "started": "Started",
    "paused": "Paused",
    "resumed": "Resumed",
    "steered": "Steered (priority)",
    "pause_refused": "Pause refused",
    "question": "Asked the researcher",
    "answered": "Read the answer",
    "needs_attention": "Paused itself",
    "awaiting_approval": "Waiting for approval",
    "approved": "Approved",
    "approval_timeout": "Stopped: no approval came",
    "budget_stopped_runs": "Runs stopped at a budget cap",
    "superseded": "Restarted by a critical steer",
    "worker_restarted": "Its worker was restarted",
    "done": "Done",
    "failed": "Failed",
    "stopped": "Stopped",
}
TIMELINE_LIMIT = 100


def timeline(loop: ResearchLoop) -> list[dict]:
    """The loop's life, oldest first: its lifecycle events, the steers it got (a MESSAGE steer
    is an inbox entry, not an event) and the commands refused, each with its time and words."""
    agent_id = loop.agent_id
    events = Event.objects.filter(agent_id=agent_id, kind__in=TIMELINE_EVENTS).order_by("-id")
    items = [
        {"at": e.created_at, "what": TIMELINE_EVENTS[e.kind], "detail": _event_detail(e)}
        for e in events[:TIMELINE_LIMIT]
    ]
    messages = MemoryEntry.objects.filter(target_id=agent_id, type="message").order_by(
        "-created_at"
    )
    items += [
        {"at": m.created_at, "what": "Steered (message)", "detail": str(m.data.get("context", ""))}
        for m in messages[:TIMELINE_LIMIT]
        if isinstance(m.data, dict)
    ]
    refused = AgentCommand.objects.filter(agent_id=agent_id, status=CommandStatus.REFUSED)
    items += [
        {"at": c.created_at, "what": f"{c.kind.capitalize()} not carried out", "detail": c.detail}
        for c in refused.order_by("-created_at")[:TIMELINE_LIMIT]
    ]
    return sorted(items, key=lambda item: item["at"])[-TIMELINE_LIMIT:]


def _event_detail(event) -> str:
    payload = event.payload if isinstance(event.payload, dict) else {}
    for key in ("context", "reason", "error", "cause", "question"):
        if isinstance(payload.get(key), str) and payload[key]:
            return payload[key]
    return ""
