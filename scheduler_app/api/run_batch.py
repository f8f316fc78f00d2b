"""POST /api/runs/batch: up to 1,000 runs in one request, all made or none
(scheduler_app.runs.batch). Each run is what POST /api/runs takes; a bad one is named by its
index in the list, with every other bad one, in one 422."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from ninja import Router, Schema, Status
from pydantic import (
    ConfigDict,
    Field,
    SkipValidation,
    StringConstraints,
    ValidationError,
    field_validator,
)

from accounts_app.auth import agent_of
from agentsys.run_env import check_env, check_venv
from scheduler_app import loop_scope
from scheduler_app.api.run_input import EXECUTOR_OPTIONS, STOP_WHEN_HELP, RunIn, check_stop_when
from scheduler_app.api.runs import RunOut
from scheduler_app.queue.accounts import person_of
from scheduler_app.runs import batch as run_batch

router = Router()
# What the batch may say for all its runs (its env goes under each run's own, by variable).
DEFAULTED = ("sweep_id", "workdir", "auto_start", "venv", "env", "stop_when")


class RunBatchIn(Schema):
    model_config = ConfigDict(extra="forbid")

    # The runs' schema is RunIn's; each is checked here (_parsed), so that a bad one is named
    # by its index, with all the others, instead of pydantic's first error in the list.
    runs: Annotated[
        list[SkipValidation[RunIn]],
        Field(
            min_length=1,
            max_length=run_batch.MAX_RUNS,
            description="Each what POST /api/runs takes; made (and queued) in this order",
        ),
    ]
    sweep_id: str | None = Field(None, description="The sweep of the runs that name none")
    workdir: Annotated[str, StringConstraints(max_length=1000)] | None = Field(
        None, description="The workdir of the runs that name none"
    )
    auto_start: bool | None = Field(None, description="auto_start of the runs that do not say")
    env: dict[str, Any] | None = Field(
        None, description="Environment variables of every run, under each run's own env"
    )
    venv: str | None = Field(None, description="The virtual environment of the runs naming none")
    stop_when: list[Any] | None = Field(
        None, max_length=50, description=STOP_WHEN_HELP + " (of the runs that bring none)"
    )

    _stop_rules_read = field_validator("stop_when")(check_stop_when)
    _env_is_variables = field_validator("env")(check_env)
    _venv_is_a_path = field_validator("venv")(check_venv)


class BatchErrorOut(Schema):
    detail: str
    errors: list[dict[str, Any]] = Field(
        description="Each fault of a run: {index (in `runs`), field, detail}; of a malformed "
        "body: {loc, msg}"
    )


@router.post(
    "/runs/batch",
    response={201: list[RunOut], 422: BatchErrorOut},
    summary="Create (and start) many runs at once: all of them, or none",
    description="Runs are created in the list's order, and with auto_start queued in it (the "
    "queue is first in, first out). `sweep_id`, `workdir`, `auto_start`, `venv` and "
    "`stop_when` at the top "
    "apply to each run that does not have the key; `env` at the top goes under each run's "
    "own. With an agent's token, runs that name no sweep join the agent's.",
    tags=["runs"],
)
def create_runs(request, payload: RunBatchIn):
    defaults = payload.dict(include=set(DEFAULTED), exclude_none=True)
    agent_id = agent_of(request)
    items, bad, dirs = [], [], {}
    for index, raw in enumerate(payload.runs):
        if isinstance(raw, dict):
            own_env = raw.get("env")
            raw = {**defaults, **raw}
            if "env" in defaults and isinstance(own_env, dict):
                raw["env"] = {**defaults["env"], **own_env}
        fields, faults = _parsed(index, raw, dirs)
        bad += faults
        if fields is not None:
            fields["sweep_id"] = _sweep_of(agent_id, index, fields["sweep_id"])
            items.append((index, fields))
    try:
        if bad:  # what no schema sees of the others too, so that one answer lists all
            raise run_batch.BatchRefused(bad + run_batch.check_runs(items))
        person = person_of(request)
        made = run_batch.create_runs(
            [{**f, "created_by": person} for _, f in items], created_by_agent=agent_id
        )
    except run_batch.BatchRefused as refused:
        return Status(422, _refusal(refused.bad, len(payload.runs)))
    return Status(201, made)


def _sweep_of(agent_id: str, index: int, sweep_id: str | None) -> str | None:
    """loop_scope.sweep_for_new_run, its refusal naming the run: a loop's token makes its
    runs in its own sweeps only, and one outside them refuses the whole batch (403)."""
    try:
        return loop_scope.sweep_for_new_run(agent_id, sweep_id)
    except loop_scope.LoopRefused as refused:
        raise loop_scope.LoopRefused(f"run {index}: {refused}") from None


def _refusal(bad: list[run_batch.BadRun], total: int) -> dict:
    """The 422: every fault under `errors`, the first few in words (what a script prints, or
    an MCP tool hands its model)."""
    said = [f"run {b.index}" + (f" {b.field}" if b.field else "") + f": {b.detail}" for b in bad]
    more = f"; and {len(said) - 5} more" if len(said) > 5 else ""
    count = len({b.index for b in bad})
    return {
        "detail": f"{count} of {total} runs cannot be made, so none was: "
        + "; ".join(said[:5])
        + more,
        "errors": [b.as_dict() for b in bad],
    }


def _parsed(index: int, raw, dirs: dict) -> tuple[dict | None, list[run_batch.BadRun]]:
    """One run of the batch as create_run's keywords, or its faults (`dirs`: which
    workdirs are directories, asked once each)."""
    if not isinstance(raw, dict):
        return None, [run_batch.BadRun(index, "", "a run is an object, as POST /api/runs takes")]
    try:
        run = RunIn.model_validate(raw)
    except ValidationError as error:
        return None, [
            run_batch.BadRun(index, ".".join(str(p) for p in e["loc"]), e["msg"])
            for e in error.errors()
        ]
    # With its code named, the workdir is on the script's machine and hosts check it out.
    if run.workdir and run.code is None and run.workdir not in dirs:
        dirs[run.workdir] = Path(run.workdir).is_dir()
    if run.workdir and run.code is None and not dirs[run.workdir]:
        return None, [run_batch.BadRun(index, "workdir", f"{run.workdir} is not a directory")]
    fields = run.dict(exclude=EXECUTOR_OPTIONS)
    return {**fields, "executor_options": run.executor_options()}, []
