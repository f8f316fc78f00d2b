"""REST for research loops (the original's /wild/v2/*): start one, list them, read one with
its history and runs, its iteration log, and steer / pause / resume / stop it (the agents'
commands, answered 202 the same way)."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Annotated, Any, Literal

from django.http import HttpResponse
from ninja import Field, Query, Router, Schema, Status
from pydantic import ConfigDict, StringConstraints, field_validator, model_validator

from agents_app import api as agents_api
from agents_app.schemas import CommandOut, ErrorOut, SteerIn, SteerOut
from agentsys.metric_sources.stdout import MAX_PATTERN_LENGTH
from agentsys.research.budget import CAPS
from agentsys.research.run_wakes import parse_wake_when
from agentsys.run_env import check_env, check_venv
from common.api_contract import MAX_OFFSET
from common.budget_schema import BudgetCaps
from ledger_app.api import SpentOut
from research_app import approvals, questions, selectors, services
from research_app.models import ResearchLoop
from research_app.questions import MAX_ANSWER_CHARS
from scheduler_app.api.run_input import (
    STOP_WHEN_HELP,
    SlurmOptionsIn,
    check_metrics_pattern,
    check_stop_when,
)

router = Router(tags=["research"])


Pattern = Annotated[str, StringConstraints(max_length=MAX_PATTERN_LENGTH)]


class BudgetIn(BudgetCaps):
    @model_validator(mode="after")
    def _some_cap(self):
        if all(getattr(self, name) is None for name in CAPS):
            raise ValueError(f"name at least one cap: {', '.join(CAPS)}")
        for name in CAPS:
            if getattr(self, name) is not None and not math.isfinite(getattr(self, name)):
                raise ValueError(f"{name} must be finite")
        return self


class ApprovalOut(Schema):
    kind: str = Field("cap", description="cap: at a budget cap; batch: its next experiments")
    reason: str
    cap: dict | None = None
    spent: dict | None = None
    batch: list[dict] | None = Field(None, description="A batch's runs: goal, command, GPUs")
    expected_gpu_hours: float | None = None


class ApproveIn(Schema):
    model_config = ConfigDict(extra="forbid")

    add: dict[str, float] = Field(
        {},
        description='What to add to which cap, e.g. {"gpu_hours": 1} (spent is never reset); '
        "nothing, to let a batch waiting for approval start",
    )


def check_wake_when(conditions: list | None) -> list | None:
    """A condition the loop cannot watch is a 422 naming it (run_wakes.parse_wake_when)."""
    return None if conditions is None else list(parse_wake_when(conditions))


class ResearchIn(Schema):
    model_config = ConfigDict(extra="forbid")

    goal: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=5000)]
    max_iterations: int = Field(25, ge=1, le=1000)
    wait_seconds: float = Field(30, ge=0, le=86400)
    autonomy_level: Literal["cautious", "balanced", "full"] = "balanced"
    max_experiments_per_iteration: int = Field(
        8, ge=1, le=100, description="How many of one reply's experiments run; the rest are refused"
    )
    workdir: Annotated[str, StringConstraints(max_length=1000)] | None = None
    chat_session_id: Annotated[str, StringConstraints(max_length=40)] | None = None
    metrics_pattern: Pattern | None = Field(
        None,
        description=(
            "A regex with named groups read on each line its experiments print (their "
            "sweep's pattern), e.g. `it (?P<step>\\d+) cost (?P<cost>\\S+)`"
        ),
    )

    backend: Literal["subprocess", "slurm"] | None = Field(
        None, description="Where its experiments run (unset: AGENTSYS_RUN_BACKEND)"
    )
    slurm: SlurmOptionsIn | None = Field(None, description="sbatch options of its experiments")
    env: dict[str, Any] | None = Field(
        None, description='Environment variables of its experiments, e.g. {"HF_HOME": "/data"}'
    )
    venv: str | None = Field(
        None,
        description="The virtual environment its experiments run in (relative to the workdir, "
        "or absolute); unset: the workdir's .venv/ when it has one",
    )

    include_uncommitted: bool = Field(
        False,
        description="Start its branch with the workdir's uncommitted changes (else from HEAD "
        "only; the person's files are never touched either way)",
    )
    commit_allow: list[Annotated[str, StringConstraints(min_length=1, max_length=200)]] | None = (
        Field(
            None,
            max_length=50,
            description='Output files its commits take all the same, e.g. ["*.pt"]',
        )
    )

    budget: BudgetIn | None = Field(
        None,
        description="Caps on what it spends; at one it waits for POST /api/research/{id}/approve",
    )
    approval_gpus: int = Field(
        4, ge=0, le=10_000, description="A balanced loop asks before a batch needing more GPUs"
    )
    approval_timeout_s: float = Field(
        86400, ge=1, le=30 * 86400, description="An approval not given in this time stops it"
    )
    stop_when: list[Any] | None = Field(
        None,
        max_length=50,
        description=STOP_WHEN_HELP + ' (of its experiments; unset: [{"metric": "loss", '
        '"nan": true}], a NaN loss stops a run and wakes the loop; [] for none)',
    )
    wake_on: Literal["each", "all"] = Field(
        "each",
        description="each: it reads each experiment's result as it ends and is asked again "
        "while the others go on; all: it waits for the whole batch",
    )

    _metrics_pattern_compiles = field_validator("metrics_pattern")(check_metrics_pattern)
    wake_when: list[Any] | None = Field(
        None,
        max_length=10,
        description='With wake_on "each": what else wakes it while its runs go on: "alert" '
        '(one of them raised an alert), {"metric": "loss", "below": 0.1} or {"metric": '
        '"loss", "above": 3} (a run\'s last value crossed it; once a run); its next prompt '
        'says what woke it ("run … reached loss 0.08 at step 400")',
    )

    _stop_rules_read = field_validator("stop_when")(check_stop_when)
    _wake_conditions_read = field_validator("wake_when")(check_wake_when)
    _env_is_variables = field_validator("env")(check_env)
    _venv_is_a_path = field_validator("venv")(check_venv)


class ResearchOut(Schema):
    id: str
    goal: str
    status: str
    error: str
    iteration: int
    max_iterations: int
    phase: str = Field(description="The research phase it last saved (a stopped loop keeps it)")
    state: str = Field(
        description="What a person reads: what a running loop does now (awaiting_approval: it "
        "waits at a budget cap; awaiting_reply: it "
        "waits for the answer to its question), else its status"
    )
    question: str | None = Field(
        None,
        description="What the loop asks the researcher while its state is awaiting_reply "
        "(answer it with POST /api/research/{id}/answer)",
    )
    approval: ApprovalOut | None = Field(
        None,
        description="The cap it reached while its state is awaiting_approval (raise it with "
        "POST /api/research/{id}/approve)",
    )
    budget: dict | None = Field(None, description="Its caps now (approvals added)")
    sweep_id: str | None
    chat_session_id: str | None
    superseded_by: str | None
    created_at: datetime
    updated_at: datetime


class RunRef(Schema):
    id: str | None
    agent_id: str
    name: str
    status: str
    exit_code: int | None = None
    gpu_required: int | None = None


class ToolCallOut(Schema):
    """A tool the model called (an MCP server's, `<server>_<tool>`, or OpenCode's own)."""

    tool: str
    status: str
    title: str = ""
    input: Any = None
    output: str = ""


class HistoryStep(Schema):
    iteration: int | None
    phase: str | None
    promise: str | None
    summary: str | None
    files_changed: list[str] | None
    errors: list[str] | None
    duration_s: float | None
    commit: str | None
    runs: list[RunRef]
    tool_calls: list[ToolCallOut] | None = None


class LeftOutFile(Schema):
    path: str
    why: str


class ResearchDetailOut(ResearchOut):
    plan: str
    reflection: str
    opencode_session_id: str
    settings: dict
    history: list[HistoryStep]
    branch: str | None = Field(
        None, description="The loop's own branch, agentsys/<id> (null: no git repository)"
    )
    base_commit: str | None = Field(None, description="The person's HEAD it started from")
    worktree: str | None = Field(None, description="Where the branch is checked out")
    merge_command: str | None = Field(None, description="Merges the branch into the person's")
    discard_command: str | None = Field(None, description="Throws the branch and worktree away")
    left_out: list[LeftOutFile] = Field(
        [], description="Changed files its commits left out (outputs), the first 200"
    )
    left_out_count: int = 0
    spent: SpentOut | None = Field(None, description="What it spent, from the ledger")
    budget_from: dict[str, str] | None = Field(
        None,
        description="Where each cap came from: loop (its own), session (its chat's default) "
        "or person (its person's default, on the settings page); the tightest applies",
    )


def _no_loop(loop_id: str) -> Status:
    return Status(404, {"detail": f"No research loop {loop_id!r}"})


@router.post(
    "/research", response={201: ResearchDetailOut, 422: ErrorOut}, summary="Start a research loop"
)
def start_research(request, payload: ResearchIn):
    try:
        loop = services.start_research(
            **payload.dict(exclude={"slurm"}), slurm=_slurm(payload), started_by=request.user
        )
    except services.ResearchRefused as refused:
        return Status(422, {"detail": str(refused)})
    return Status(201, selectors.detail(selectors.loop(loop.agent_id)))


def _slurm(payload: ResearchIn) -> dict | None:
    return payload.slurm.dict(exclude_none=True) if payload.slurm else None


@router.get("/research", response=list[ResearchOut], summary="Research loops, newest first")
def list_research(
    request,
    limit: int = Query(50, ge=1, le=500),
    offset: int = Query(0, ge=0, le=MAX_OFFSET),
    state: Literal["awaiting_approval"] | None = Query(
        None, description="Only the loops waiting for an approval (at a cap, or before a batch)"
    ),
):
    found = selectors.loops(
        limit=limit, offset=offset, awaiting_approval=state == "awaiting_approval"
    )
    return [selectors.summary(loop) for loop in found]


@router.get(
    "/research/{loop_id}",
    response={200: ResearchDetailOut, 404: ErrorOut},
    summary="A research loop: status, plan, reflection, and each step with its runs",
)
def get_research(request, loop_id: str):
    loop = selectors.loop(loop_id)
    return selectors.detail(loop) if loop is not None else _no_loop(loop_id)


@router.get(
    "/research/{loop_id}/iteration-log",
    response={200: str, 404: ErrorOut},
    summary="The loop's iteration_log.md (markdown)",
)
def iteration_log(request, loop_id: str):
    loop = selectors.loop(loop_id)
    if loop is None:
        return _no_loop(loop_id)
    path = selectors.iteration_log_path(loop)
    if path is None:
        return Status(404, {"detail": f"{loop_id} has written no iteration log yet"})
    return HttpResponse(path.read_text(errors="replace"), content_type="text/markdown")


def _known(loop_id: str) -> bool:
    return selectors.loop(loop_id) is not None


@router.post(
    "/research/{loop_id}/steer",
    response={202: SteerOut, 404: ErrorOut, 409: ErrorOut},
    summary="Steer: critical (restart with it), priority (next iteration), message (inbox)",
)
def steer_research(request, loop_id: str, payload: SteerIn):
    if not _known(loop_id):
        return _no_loop(loop_id)
    return agents_api.steer_agent(request, loop_id, payload)


COMMAND_RESPONSES = {202: CommandOut, 404: ErrorOut, 409: ErrorOut}


@router.post("/research/{loop_id}/pause", response=COMMAND_RESPONSES, summary="Pause the loop")
def pause_research(request, loop_id: str):
    return agents_api.pause_agent(request, loop_id) if _known(loop_id) else _no_loop(loop_id)


@router.post("/research/{loop_id}/resume", response=COMMAND_RESPONSES, summary="Resume it")
def resume_research(request, loop_id: str):
    return agents_api.resume_agent(request, loop_id) if _known(loop_id) else _no_loop(loop_id)


@router.post(
    "/research/{loop_id}/stop",
    response=COMMAND_RESPONSES,
    summary="Stop the loop, its experiments and its model session",
)
def stop_research(request, loop_id: str):
    return agents_api.stop_agent(request, loop_id) if _known(loop_id) else _no_loop(loop_id)


class AnswerIn(Schema):
    model_config = ConfigDict(extra="forbid")

    answer: Annotated[
        str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_ANSWER_CHARS)
    ]


class AnswerOut(Schema):
    detail: str


@router.post(
    "/research/{loop_id}/answer",
    response={202: AnswerOut, 404: ErrorOut, 409: ErrorOut},
    summary="Answer the loop's question: the answer goes into its next prompt",
)
def answer_research(request, loop_id: str, payload: AnswerIn):
    try:
        questions.answer_question(
            agent_id=loop_id, answer=payload.answer, user=agents_api._caller(request)
        )
    except ResearchLoop.DoesNotExist:
        return _no_loop(loop_id)
    except questions.AnswerRefused as refused:
        return Status(409, {"detail": str(refused)})
    return Status(202, {"detail": "Answer sent: the loop reads it in its next prompt."})


@router.post(
    "/research/{loop_id}/approve",
    response={202: AnswerOut, 404: ErrorOut, 409: ErrorOut, 422: ErrorOut},
    summary="Approve more spending: raise the caps of a loop waiting at one; it goes on",
)
def approve_research(request, loop_id: str, payload: ApproveIn):
    try:
        approvals.approve(agent_id=loop_id, add=payload.add, user=agents_api._caller(request))
    except ResearchLoop.DoesNotExist:
        return _no_loop(loop_id)
    except approvals.ApprovalRefused as refused:
        status = 409 if isinstance(refused, approvals.NotWaiting) else 422
        return Status(status, {"detail": str(refused)})
    return Status(202, {"detail": "Approved: the loop's caps are raised and it goes on."})
