"""The research loop's state, kept so the loop can resume where it was.

It lives in `.agents/wild/<agent id>/state.json` of the workdir, replaced atomically after
every step, and a copy goes to the database (the `research_state` event) for the API.
`in_progress` names the iteration under way: after a restart, an iteration whose experiments
were already launched waits for them (they are re-adopted, not re-run); one that had not got
that far is asked again.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

PLANNING, ITERATING, REFLECTING, ENDED = "planning", "iterating", "reflecting", "ended"
PHASES = (PLANNING, ITERATING, REFLECTING, ENDED)
# A history step that is no step of the loop's: a failed model call (it uses up no iteration).
MODEL_ERROR = "model_error"
MAX_LEFT_OUT = 200  # files named in the state (saved after every step); the rest are counted


@dataclass
class IterationRecord:
    """One step of the loop, as the history shows it: the plan (iteration 0), an iteration,
    or a reflection (promise REFLECT_CONTINUE / REFLECT_STOP)."""

    iteration: int
    phase: str  # "plan" | "iteration" | "reflection" | MODEL_ERROR
    promise: str | None = None
    summary: str = ""
    files_changed: list[str] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    duration_s: float = 0.0
    started_at: float = 0.0
    finished_at: float = 0.0
    commit: str = ""
    # Seconds spent waiting on the model and on experiments: the loop's own overhead is the
    # rest (bench/research.py reports it).
    model_s: float = 0.0
    experiments_s: float = 0.0
    # The tools the model called in this step (agentsys.research.llm.tool_parts).
    tool_calls: list[dict] = field(default_factory=list)


@dataclass
class ResearchState:
    goal: str
    max_iterations: int = 25
    status: str = "running"  # running | done | failed | stopped
    phase: str = PLANNING
    iteration: int = 0
    plan: str = ""
    history: list[dict] = field(default_factory=list)
    opencode_session_id: str = ""
    reflection: str = ""
    no_progress_streak: int = 0
    short_iteration_count: int = 0
    steer_context: str = ""
    settings: dict = field(default_factory=dict)
    # Results of the last iteration's experiments (ExperimentResult dicts), for the next prompt.
    last_results: list[dict] = field(default_factory=list)
    # What was wrong with the model's last reply, told to it in the next prompt.
    parse_problems: list[str] = field(default_factory=list)
    # The iteration under way: {"iteration", "started_at", "reply", "children": [...]}.
    in_progress: dict = field(default_factory=dict)
    consecutive_model_failures: int = 0
    # The open question to the researcher ({"text", "iteration", "asked_at"}; {} when none):
    # the loop waits for the answer (agentsys.research.attention), also after a restart.
    question: dict = field(default_factory=dict)
    tagless_streak: int = 0  # replies in a row without any of the loop's tags
    started_at: float = field(default_factory=time.time)
    finished_at: float | None = None
    # Its own branch (agentsys.research.branch.LoopBranch as a dict; {} when it has none).
    branch: dict = field(default_factory=dict)
    # Changed files its commits left out (path → why), the first MAX_LEFT_OUT of them.
    left_out: dict = field(default_factory=dict)
    left_out_count: int = 0
    # Its caps (agentsys.research.budget; approvals add to them), the approval it waits for
    # ({} when none), and what its own replies reported paying the model.
    budget: dict = field(default_factory=dict)
    approval: dict = field(default_factory=dict)
    spent_model: dict = field(default_factory=dict)
    # Experiments launched by earlier iterations and still running (their launch records):
    # the loop read the others' results as they ended (agentsys.research.experiments.
    # wait_for_news), and what woke it, in words, for the next prompt.
    running: list[dict] = field(default_factory=list)
    woke: str = ""
    # When it last woke (seconds since the epoch; 0: not yet), and the [run id, condition]
    # pairs of its wake_when that woke it (agentsys.research.run_wakes), not watched again.
    wake_since: float = 0.0
    woken_by: list[list[str]] = field(default_factory=list)

    def keep_left_out(self, found: dict[str, str]) -> None:
        new = [p for p in found if p not in self.left_out]
        self.left_out_count += len(new)
        for path in new[: max(0, MAX_LEFT_OUT - len(self.left_out))]:
            self.left_out[path] = found[path]

    def record(self, entry: IterationRecord) -> None:
        self.history.append(asdict(entry))

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> ResearchState:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.as_dict(), indent=1, default=str))
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: Path) -> ResearchState | None:
        """The saved state; None when there is none or it cannot be read (the loop then
        starts over, which it says in its log)."""
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or not isinstance(data.get("goal"), str):
            return None
        return cls.from_dict(data)
