"""Many runs in one go (POST /api/runs/batch): a script's or a loop's hundreds of runs.

Each run ends up exactly as scheduler_app.runs.launch.create_run (and, with auto_start, start_run
and queue.submit) would leave it: queued, or rejected with the reason, its executor agent
and queue request saying the same word (scheduler_app.queue.lifecycle). What is the same for many
runs is done once: the sweeps and chats named are looked up in one query each, a workdir's
code is recorded once (one bundle per commit), a rejection is judged once per kind of
request; runs, agents and requests are inserted a statement each, in one transaction, and
one NOTIFY wakes the daemons at commit. The runs are made in the list's order: their
created_at, and their requests' (the queue's FIFO order), follow it.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import models, transaction
from django.utils import timezone

from agents_app.models import Agent
from agents_app.services import create_agents
from agentsys.run_dir import run_dir_of
from agentsys.types import AgentStatus, RequestStatus
from common.ids import fresh_ids
from scheduler_app import oplog
from scheduler_app.models import (
    Run,
    RunStatus,
    ScheduleRequest,
    Sweep,
    new_request_id,
    new_run_id,
)
from scheduler_app.queue import claims as queue
from scheduler_app.queue.accounts import accounts_of
from scheduler_app.runs import code as run_code
from scheduler_app.runs.executor import executor_of, inherit_options, sweep_options

MAX_RUNS = 1000


@dataclass(frozen=True)
class BadRun:
    """Why the run at `index` of a batch cannot be made; `field` names the part at fault."""

    index: int
    field: str
    detail: str

    def as_dict(self) -> dict:
        return {"index": self.index, "field": self.field, "detail": self.detail}


class BatchRefused(ValueError):
    """Some runs of a batch cannot be made (`bad` says which and why): none was."""

    def __init__(self, bad: Sequence[BadRun]):
        self.bad = sorted(bad, key=lambda b: b.index)
        super().__init__(f"{len({b.index for b in self.bad})} of the runs cannot be made")


def check_runs(items: Sequence[tuple[int, dict]]) -> list[BadRun]:
    """What is wrong with each (index, create_run keywords) that no schema can see: a sweep
    or chat that does not exist, a `code` that cannot be used, a bad gpu_required."""
    bad: list[BadRun] = []
    sweeps = _existing(Sweep, {item.get("sweep_id") for _, item in items})
    chats = _existing(
        Run._meta.get_field("chat_session").related_model,
        {item.get("chat_session_id") for _, item in items},
    )
    codes: dict[str, str | None] = {}
    for index, item in items:
        try:
            queue.validate_gpu_required(item.get("gpu_required", 0))
        except queue.InvalidRequest as error:
            bad.append(BadRun(index, "gpu_required", str(error)))
        sweep, chat = item.get("sweep_id"), item.get("chat_session_id")
        if sweep is not None and sweep not in sweeps:
            bad.append(BadRun(index, "sweep_id", f"no sweep {sweep!r}"))
        if chat is not None and chat not in chats:
            bad.append(BadRun(index, "chat_session_id", f"no chat session {chat!r}"))
        if item.get("code"):
            key = json.dumps(item["code"], sort_keys=True)
            if key not in codes:
                codes[key] = _code_refused(item["code"])
            if codes[key]:
                bad.append(BadRun(index, "code", codes[key]))
    return bad


def _existing(model: type[models.Model], ids: set) -> set:
    ids.discard(None)
    return set(model.objects.filter(pk__in=ids).values_list("pk", flat=True)) if ids else set()


def _code_refused(code: dict) -> str | None:
    try:
        run_code.from_request(code)
    except run_code.CodeRefused as error:
        return str(error)
    return None


def create_runs(items: Sequence[dict], *, created_by_agent: str = "") -> list[Run]:
    """Make the runs, each item create_run's keywords (name, command, workdir, gpu_required,
    requires, params, sweep_id, chat_session_id, auto_start, executor_options, code), all or
    none: BatchRefused lists every run that cannot be made. Returns them in `items`' order."""
    if not 1 <= len(items) <= MAX_RUNS:
        raise BatchRefused([BadRun(0, "runs", f"a batch holds 1 to {MAX_RUNS} runs")])
    items = [
        {**item, "workdir": item.get("workdir") or str(settings.AGENTSYS_WORKDIR)} for item in items
    ]
    bad = check_runs(list(enumerate(items)))
    if bad:
        raise BatchRefused(bad)
    codes = _record_code(items)  # the git runs before the transaction holds anything
    with transaction.atomic():
        made = insert_runs(items, codes, created_by_agent=created_by_agent)
    for run in made:
        if run.agent_id:
            oplog.run_queued(run)
    return made


def _record_code(items: Sequence[dict]) -> list[run_code.RecordedCode]:
    """Each item's code: the `code` it sent, or its workdir's, recorded once per workdir."""
    host = settings.AGENTSYS.host_name
    seen: dict[str, run_code.RecordedCode] = {}
    bundled: set[str] = set()
    codes = []
    for item in items:
        if item.get("code"):
            key = "code:" + json.dumps(item["code"], sort_keys=True)
            if key not in seen:
                seen[key] = run_code.from_request(item["code"])
        else:
            key = "workdir:" + item["workdir"]
            if key not in seen:
                found = run_code.take_here(item["workdir"], host=host, bundled=bundled)
                seen[key] = found if found.host else run_code.NOTHING
                if found.bundle is not None:
                    bundled.add(found.commit)
        codes.append(seen[key])
    return codes


def insert_runs(
    items: Sequence[dict], codes: Sequence[run_code.RecordedCode], *, created_by_agent: str
) -> list[Run]:
    """Insert checked runs (create_runs' items, workdirs set), each with its recorded code,
    inside the caller's transaction; the auto_start ones queued or rejected."""
    stored: dict[int, dict] = {}
    for code in codes:  # a code shared by many runs is one object: stored once
        if id(code) not in stored:
            stored[id(code)] = run_code.store_code(code)
    inherited = sweep_options(Sweep.objects.filter(pk__in={i.get("sweep_id") for i in items}))
    rows = [
        Run(
            id=run_id,
            name=item["name"],
            command=item["command"],
            workdir=item["workdir"],
            gpu_required=item.get("gpu_required", 0),
            requires=item.get("requires") or {},
            params=item.get("params") or {},
            executor_options=inherit_options(
                item.get("executor_options") or {}, inherited.get(item.get("sweep_id"))
            ),
            sweep_id=item.get("sweep_id"),
            chat_session_id=item.get("chat_session_id"),
            auto_start=bool(item.get("auto_start")),
            created_by_agent=created_by_agent,
            created_by=item.get("created_by"),
            **stored[id(code)],
        )
        for run_id, item, code in zip(
            fresh_ids(Run, [new_run_id] * len(items)), items, codes, strict=True
        )
    ]
    started = [run for run in rows if run.auto_start]
    agents = create_agents([executor_of(run) for run in started])
    requests = _submit(started, agents)
    Run.objects.bulk_create(rows)
    ScheduleRequest.objects.bulk_create(requests)
    for model, made in ((Agent, agents), (Run, rows), (ScheduleRequest, requests)):
        _keep_list_order(model, made)
    if any(request.status == RequestStatus.QUEUED for request in requests):
        queue.notify_queue()  # one wake-up for the lot, at commit
    return rows


def _submit(started: list[Run], agents: list[Agent]) -> list[ScheduleRequest]:
    """queue.submit for each started run (`agents` its executors, in order): the queue
    requests to insert, each queued or rejected with the reason, the run and agent given the
    same word (the rejected agents' rows are updated here, already inserted)."""
    now = timezone.now()
    reasons: dict[tuple, str | None] = {}
    requests, rejected = [], {}
    request_ids = fresh_ids(ScheduleRequest, [new_request_id] * len(started))
    accounts = accounts_of(started)
    for run, agent, request_id in zip(started, agents, request_ids, strict=True):
        backend, requires = queue.route(agent.config)
        kind = (run.gpu_required, backend, json.dumps(requires, sort_keys=True))
        if kind not in reasons:
            reasons[kind] = queue.rejection_reason(run.gpu_required, backend, requires)
        reason = reasons[kind]
        run.agent, run.run_dir = agent, str(run_dir_of(run.workdir, agent.id))
        run.status = RunStatus.REJECTED if reason else RunStatus.QUEUED
        run.error, run.finished_at = reason or "", now if reason else None
        if reason:
            rejected.setdefault(reason, []).append(agent.id)
            agent.status, agent.error, agent.finished_at = AgentStatus.REJECTED, reason, now
        requests.append(
            ScheduleRequest(
                id=request_id,
                agent=agent,
                agent_cls_path=agent.cls_path,
                goal=agent.goal,
                parent_id=agent.parent_id,
                config=agent.config,
                gpu_required=run.gpu_required,
                requires=requires,
                backend=backend,
                account=accounts[run.pk],
                status=RequestStatus.REJECTED if reason else RequestStatus.QUEUED,
                rejection_reason=reason or "",
                finished_at=now if reason else None,
            )
        )
    for reason, agent_ids in rejected.items():
        Agent.objects.filter(pk__in=agent_ids).update(
            status=AgentStatus.REJECTED, error=reason, finished_at=now
        )
    return requests


def _keep_list_order(model: type[models.Model], rows: Sequence[models.Model]) -> None:
    """bulk_create stamps each row's created_at from the clock in turn: two rows may share a
    microsecond (or the clock step back), and the queue breaks a tie by the (random) id. Then
    the rows are restamped a microsecond apart, in the list's order."""
    stamps = [row.created_at for row in rows]
    if all(a < b for a, b in itertools.pairwise(stamps)):
        return
    for i, row in enumerate(rows):
        row.created_at = stamps[0] + timedelta(microseconds=i)
    model.objects.bulk_update(rows, ["created_at"])
