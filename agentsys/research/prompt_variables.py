"""The variables every prompt of a research loop is rendered with (skills/wild_v2_*): its
goal and plan, where it is, what its experiments gave, what was wrong with the model's last
reply, and whether it is struggling (agentsys.research.struggle), from the loop's state."""

from __future__ import annotations

from agentsys.research.results import ExperimentResult, format_history, format_results
from agentsys.research.settings import ResearchSettings
from agentsys.research.state import ResearchState
from agentsys.research.struggle import detect_struggle
from agentsys.research.workspace import Workspace

NO_RESULTS = "No experiments have run yet."


def prompt_variables(
    state: ResearchState,
    settings: ResearchSettings,
    workspace: Workspace,
    *,
    agent_id: str,
    memories_text: str,
    **extra,
) -> dict:
    """The variables; the struggle counts are kept in `state` too (its page shows them)."""
    iterations = [h for h in state.history if h.get("phase") == "iteration"]
    streak, shorts, warning = detect_struggle(iterations)
    state.no_progress_streak, state.short_iteration_count = streak, shorts
    results = [ExperimentResult(**r) for r in state.last_results]
    return {
        "goal": state.goal,
        "iteration": state.iteration,
        "max_iterations": state.max_iterations,
        "session_id": agent_id,
        "workdir": str(workspace.workdir),  # its worktree's, when it has a branch
        "tasks_path": str(workspace.tasks_path),
        "log_path": str(workspace.log_path),
        "steer_context": state.steer_context,
        "history": format_history(state.history),
        "no_progress_streak": streak,
        "short_iteration_count": shorts,
        "autonomy_level": settings.autonomy_level,
        "memories_text": memories_text,
        "evo_sweep_enabled": settings.evo_sweep_enabled,
        "experiment_results": format_results(results) if results else NO_RESULTS,
        "struggle_warning": warning,
        "parse_problems": "\n".join(f"- {p}" for p in state.parse_problems),
        "plan": state.plan,
        **extra,
    }
