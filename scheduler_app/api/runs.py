"""REST for runs (commands people and scripts launch) and alerts (what they should see)."""

from __future__ import annotations

import functools
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

from django.db import transaction
from django.http import HttpResponse
from ninja import Query, Router, Schema, Status
from pydantic import ConfigDict, Field, StringConstraints

from accounts_app.auth import agent_of
from agentsys.types import END_STATE_HELP
from common.api_contract import MAX_OFFSET
from scheduler_app import loop_scope, services
from scheduler_app.api.run_input import EXECUTOR_OPTIONS, RunIn
from scheduler_app.models import Alert, AlertStatus, Run, RunStatus
from scheduler_app.queue import claims as queue
from scheduler_app.queue.accounts import person_of
from scheduler_app.runs import code as run_code
from scheduler_app.runs import launch as runs
from scheduler_app.runs import log_reader as run_log_reader

router = Router()
MAX_LOG_CHUNK = 1_000_000


class ErrorOut(Schema):
    detail: str


class RunCodeOut(Schema):
    commit: str = Field(description="The workdir's git commit when it was made; empty: none")
    remote: str = Field(description="Where a host fetches the commit; empty: its stored bundle")
    patch_digest: str = Field(description="sha256 of its uncommitted changes; empty: none")
    has_patch: bool
    host: str = Field(description="The host whose disk holds the workdir; empty: unknown")
    dir: str = Field(description="Where it ran when not in the workdir: a host's checkout")
    error: str = Field(description="Why its code could not be recorded")


class RunOut(Schema):
    id: str
    name: str
    command: str
    workdir: str
    gpu_required: int
    requires: dict[str, Any] = Field(description="Host labels it needs")
    params: dict[str, Any]
    logged_params: dict[str, Any] = Field(
        description="What the script logged itself: MLflow params and tags (as tag.<name>), "
        "W&B config, TensorBoard hparams"
    )
    tracker_urls: dict[str, str] = Field(
        description='Online tracker runs the script printed, e.g. {"wandb": "https://..."}'
    )
    executor_options: dict[str, Any]
    status: RunStatus = Field(
        description=(
            "ready (not started), queued, running, paused (its processes suspended); then as "
            f"its request. {END_STATE_HELP}"
        )
    )
    agent_id: str | None
    sweep_id: str | None = Field(description="The sweep it belongs to")
    created_by_agent: str = Field(
        description="The agent whose API token made it (a research loop's); empty: a person "
        "or a script"
    )
    slurm_job_id: int | None = Field(description="Its SLURM job (backend slurm)")
    wait_reason: str = Field(description="Why a queued run waits: SLURM's reason (Resources)")
    run_dir: str
    exit_code: int | None
    error: str
    stopped_by: str = Field(
        description="The stop rule (executor_options.stop_when) that stopped it and the value "
        'that met it, e.g. "loss > 2.0 after step 100: 3.71 at step 140"; empty: none did'
    )
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    code: RunCodeOut = Field(description="The code it runs (GET /api/runs/{id}/patch: its patch)")

    @staticmethod
    def resolve_code(run: Run) -> dict:
        return run_code.summary(run)


class LogChunk(Schema):
    offset: int
    next_offset: int
    size: int
    text: str
    capped: bool = Field(
        description="Served from the database, whose copy stopped at the host's "
        "AGENTSYS_LOG_DB_CAP_MB: the rest is only in run.log on `host`"
    )
    host: str = Field(description="The host that ran it; empty when none did yet")


class AlertOut(Schema):
    id: str
    severity: str
    status: str
    message: str
    agent_id: str
    run_id: str | None
    choices: list[str]
    response: str
    created_at: datetime


class AlertResponseIn(Schema):
    model_config = ConfigDict(extra="forbid")

    response: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]


def _no(kind: str, key: str):
    return Status(404, {"detail": f"no {kind} {key!r}"})


@router.post(
    "/runs",
    response={201: RunOut, 422: ErrorOut},
    summary="Create (and start) a run",
    tags=["runs"],
)
def create_run(request, payload: RunIn):
    # With its code named, the workdir is on the script's machine and hosts check it out.
    if payload.workdir and payload.code is None and not Path(payload.workdir).is_dir():
        return Status(422, {"detail": f"workdir: {payload.workdir} is not a directory"})
    fields = payload.dict(exclude=EXECUTOR_OPTIONS)
    agent_id = agent_of(request)
    fields["sweep_id"] = loop_scope.sweep_for_new_run(agent_id, fields["sweep_id"])
    try:
        run = runs.create_run(
            **fields,
            executor_options=payload.executor_options(),
            created_by_agent=agent_id,
            created_by=person_of(request),
        )
    except queue.InvalidRequest as error:
        return Status(422, {"detail": str(error)})
    return Status(201, run)


@router.get(
    "/runs",
    response={200: list[RunOut], 400: ErrorOut},
    summary="Runs, newest first",
    tags=["runs"],
)
def list_runs(
    request,
    status: str | None = Query(None, max_length=20),
    sweep_id: str | None = Query(None, max_length=40, description="Only this sweep's runs"),
    limit: int = Query(50, ge=1, le=500),
    offset: int = Query(0, ge=0, le=MAX_OFFSET),
):
    found = Run.objects.order_by("-created_at", "id")
    if sweep_id:
        found = found.filter(sweep_id=sweep_id)
    if status:
        if status not in RunStatus.values:
            allowed = ", ".join(RunStatus.values)
            return Status(400, {"detail": f"status must be one of {allowed}; got {status!r}"})
        found = found.filter(status=status)
    return list(found[offset : offset + limit])


@router.get("/runs/{run_id}", response={200: RunOut, 404: ErrorOut}, tags=["runs"])
def get_run(request, run_id: str):
    run = Run.objects.filter(pk=run_id).first()
    return run if run is not None else _no("run", run_id)


@router.get(
    "/runs/{run_id}/patch",
    response={200: str, 404: ErrorOut},
    summary="The run's uncommitted changes (a git patch; empty when it had none)",
    openapi_extra={
        "responses": {
            "200": {
                "description": "`git apply --binary` applies it onto the run's code.commit",
                "content": {"text/x-diff": {"schema": {"type": "string"}}},
            }
        }
    },
    tags=["runs"],
)
def run_patch(request, run_id: str):
    run = Run.objects.filter(pk=run_id).first()
    if run is None:
        return _no("run", run_id)
    return HttpResponse(run_code.patch_of(run), content_type="text/x-diff; charset=utf-8")


def _run_action(request, run_id: str, action):
    if not Run.objects.filter(pk=run_id).exists():
        return _no("run", run_id)
    loop_scope.check_run(agent_of(request), run_id)  # a loop's token: its own runs only
    try:
        return Status(200, action(run_id=run_id))
    except runs.RunRefused as error:
        return Status(409, {"detail": str(error)})


ACTION_RESPONSES = {200: RunOut, 404: ErrorOut, 409: ErrorOut}


@router.post("/runs/{run_id}/start", response=ACTION_RESPONSES, tags=["runs"])
def start_run(request, run_id: str):
    return _run_action(request, run_id, runs.start_run)


@router.post("/runs/{run_id}/stop", response=ACTION_RESPONSES, tags=["runs"])
def stop_run(request, run_id: str):
    return _run_action(request, run_id, runs.stop_run)


@router.post(
    "/runs/{run_id}/rerun",
    response=ACTION_RESPONSES,
    summary="Run a finished run's command again, as a new run",
    tags=["runs"],
)
def rerun(request, run_id: str):
    rerun_as = functools.partial(runs.rerun, created_by_agent=agent_of(request))
    return _run_action(request, run_id, rerun_as)


@router.get(
    "/runs/{run_id}/logs",
    response={200: LogChunk, 404: ErrorOut},
    tags=["runs"],
    summary="A slice of run.log: bytes [offset, offset+limit); poll with next_offset",
)
def run_logs(
    request,
    run_id: str,
    offset: int = Query(0, ge=0),
    limit: int = Query(65536, ge=1, le=MAX_LOG_CHUNK),
):
    """From run.log where this web shares the disk of the host that ran it, else from what
    that host shipped to the database (scheduler_app.runs.log_reader)."""
    run = Run.objects.select_related("agent__host").filter(pk=run_id).first()
    if run is None:
        return _no("run", run_id)
    found = run_log_reader.read_slice(run, offset, limit)
    return {
        "offset": found.offset,
        "next_offset": found.next_offset,
        "size": found.size,
        "text": found.data.decode("utf-8", "replace"),
        "capped": found.capped,
        "host": found.host,
    }


@router.get(
    "/alerts",
    response={200: list[AlertOut], 400: ErrorOut},
    tags=["alerts"],
    summary="Alerts, newest first (status=pending for the open ones)",
)
def list_alerts(
    request, status: str | None = Query(None, max_length=20), limit: int = Query(50, ge=1, le=500)
):
    found = Alert.objects.order_by("-created_at")
    if status:
        if status not in AlertStatus.values:
            return Status(
                400,
                {
                    "detail": f"status must be one of "
                    f"{', '.join(AlertStatus.values)}; got {status!r}"
                },
            )
        found = found.filter(status=status)
    return list(found[:limit])


@router.post(
    "/alerts/{alert_id}/respond",
    response={200: AlertOut, 404: ErrorOut, 409: ErrorOut},
    tags=["alerts"],
)
def respond_to_alert(request, alert_id: str, payload: AlertResponseIn):
    if not Alert.objects.filter(pk=alert_id).exists():
        return _no("alert", alert_id)
    user = None if request.auth == "token" else request.user
    try:
        with transaction.atomic():
            alert = services.respond_to_alert(
                alert_id=alert_id, response=payload.response, user=user
            )
    except services.ServiceError as error:
        return Status(409, {"detail": str(error)})
    if payload.response == "stop":
        services.stop_what_raised(alert=alert, user=user)  # the admin's stop action does too
    return alert
