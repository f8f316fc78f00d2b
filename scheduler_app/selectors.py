"""Reads for hosts, GPUs, the queue and runs."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Count, OuterRef, Prefetch, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from agents_app.models import Agent
from agentsys.code_snapshot import patch_files
from agentsys.types import AgentRole, EndState, RequestStatus
from events_app.models import Event
from hosts_app.models import Host
from scheduler_app.models import (
    GPU,
    MetricSeries,
    Run,
    RunStatus,
    ScheduleRequest,
    Sweep,
    SweepKind,
    SweepStatus,
)
from scheduler_app.runs import code as run_code
from scheduler_app.runs import failure_line as run_log
from scheduler_app.runs import log_reader as run_log_reader


def hosts_with_gpus() -> QuerySet[Host]:
    return Host.objects.prefetch_related(
        Prefetch("gpus", queryset=GPU.objects.order_by("index"))
    ).order_by("name")


# -- runs, as the pages show them ----------------------------------------------------------------

RUN_SEARCH_FIELDS = ("name__icontains", "command__icontains", "id__icontains")
LOSS_KEYS = ("loss", "train/loss", "train_loss", "training_loss")


def run_list(*, q: str = "", status: str = "", sweep_id: str = "", limit: int = 100) -> list[Run]:
    """Runs newest first, each with `.request` (host, GPUs) and `.last_loss` attached."""
    found = Run.objects.order_by("-created_at", "id")
    if status:
        found = found.filter(status=status)
    if sweep_id:
        found = found.filter(sweep_id=sweep_id)
    if q:
        terms = Q()
        for field in RUN_SEARCH_FIELDS:
            terms |= Q(**{field: q})
        found = found.filter(terms)
    rows = list(found[:limit])
    now = timezone.now()
    for run in rows:
        run.elapsed = run_duration(run, now=now)
    _attach_requests(rows)
    _attach_last_loss(rows)
    return rows


def _attach_requests(rows: list[Run]) -> None:
    agent_ids = [run.agent_id for run in rows if run.agent_id]
    requests = {
        r.agent_id: r
        for r in ScheduleRequest.objects.filter(agent_id__in=agent_ids).select_related("host")
    }
    for run in rows:
        run.request = requests.get(run.agent_id)


def _attach_last_loss(rows: list[Run]) -> None:
    found = MetricSeries.objects.filter(run__in=rows, key__in=LOSS_KEYS).values_list(
        "run_id", "key", "last_value"
    )
    best: dict[str, tuple[int, float | None]] = {}
    for run_id, key, value in found:
        rank = LOSS_KEYS.index(key)
        if run_id not in best or rank < best[run_id][0]:
            best[run_id] = (rank, value)
    for run in rows:
        run.last_loss = best.get(run.pk, (0, None))[1]


def metric_problems(agent_id: str, limit: int = 20) -> list[dict]:
    """What the run's metric sources could not read ({"source", "problem"}), each said once by
    its executor (a corrupt event file, an over-long printed line, a pattern that timed out)."""
    events = Event.objects.filter(agent_id=agent_id, kind="metrics_problem").order_by("seq")
    return [event.payload for event in events[:limit]]


def run_page(run_id: str) -> Run | None:
    run = (
        Run.objects.select_related("sweep", "agent__host", "chat_session").filter(pk=run_id).first()
    )
    if run is None:
        return None
    _attach_requests([run])
    run.series = list(MetricSeries.objects.filter(run=run).order_by("key"))
    run.alert_list = list(run.alerts.order_by("-created_at")[:50])
    run.metric_problems = metric_problems(run.agent_id) if run.agent_id else []
    failed = run.status == RunStatus.FAILED or (run.exit_code or 0) != 0
    tail = run_log_reader.tail_text(run, run_log.TAIL_BYTES) if failed else ""
    run.log_error = run_log.error_line_in(tail)
    run.log_host = run_log_reader.host_of(run)
    # Served from the database, which stops at the cap: the page says where the rest is.
    run.log_capped_here = run.log_capped and run_log_reader.local_file(run, run.log_host) is None
    run.log_cap_mib = run.log_shipped_bytes // 2**20
    run.creator_is_loop = bool(run.created_by_agent) and _is_research_loop(run.created_by_agent)
    _attach_code(run)
    return run


PATCH_SHOWN_BYTES = 200_000  # of a run's patch on its page; the API serves the whole of it


def _attach_code(run: Run) -> None:
    """The run's uncommitted changes for its page: how many files, and the patch's start."""
    patch = run_code.patch_of(run)
    run.code_files = patch_files(patch)
    run.code_patch_text = patch[:PATCH_SHOWN_BYTES].decode("utf-8", "replace")
    run.code_patch_cut = len(patch) > PATCH_SHOWN_BYTES


def _is_research_loop(agent_id: str) -> bool:
    """Whether the agent has a loop page to link to."""
    return Agent.objects.filter(pk=agent_id, role=AgentRole.RESEARCH).exists()


def run_duration(run: Run, *, now=None) -> timedelta | None:
    if run.started_at is None:
        return None
    return (run.finished_at or now or timezone.now()) - run.started_at


def shared_keys(run_ids: list[str]) -> list[str]:
    """The metric keys any of these runs logged, loss-like ones first."""
    keys = set(
        MetricSeries.objects.filter(run_id__in=run_ids).values_list("key", flat=True).distinct()
    )
    return sorted(keys, key=lambda k: (k not in LOSS_KEYS, k))


def sweeps() -> QuerySet[Sweep]:
    """Sweeps with their run counts and their research loop's id; `sweep_status` reads them.
    Each a subquery: joined and grouped, 10^4 runs were sorted with every sweep's columns."""
    # The loop through its foreign key: research_app sits above this app.
    loops = Sweep._meta.get_field("research_loops").related_model.objects
    return Sweep.objects.annotate(
        run_count=_run_count(),
        open_runs=_run_count(status__in=RunStatus.open()),
        ended_runs=_run_count(status__in=[s.value for s in EndState]),
        loop_id=Subquery(
            loops.filter(sweep=OuterRef("pk")).order_by("agent_id").values("agent_id")[:1]
        ),
    )


def _run_count(**filters) -> Coalesce:
    runs = Run.objects.filter(sweep=OuterRef("pk"), **filters).order_by().values("sweep")
    # count(*), not count(id): the sweep's index (run_sweep_status_idx) answers it alone.
    return Coalesce(Subquery(runs.annotate(n=Count("*")).values("n")), 0)


def sweep_status(sweep: Sweep) -> str:
    """A loop's sweep says what its loop does; a sweep made over the API has no one to say
    so and reads its status off its runs: running while one is queued or running, done once
    every run has ended (a failed trial is part of a sweep), draft before any starts."""
    if sweep.kind != SweepKind.MANUAL or not hasattr(sweep, "open_runs"):
        return sweep.status
    if sweep.open_runs:
        return SweepStatus.RUNNING
    if sweep.run_count and sweep.ended_runs == sweep.run_count:
        return SweepStatus.DONE
    return SweepStatus.DRAFT if not sweep.ended_runs else SweepStatus.RUNNING


# -- the queue's counts --------------------------------------------------------------------


def queue_stats(*, host_id: int | None = None) -> dict:
    """The queue's counts (GPUs, requests by status), for one host or (host_id None) all of them."""
    gpus = GPU.objects.filter(enabled=True)
    requests = ScheduleRequest.objects.all()
    if host_id is not None:
        gpus = gpus.filter(host_id=host_id)
        requests = requests.filter(Q(host_id=host_id) | Q(status=RequestStatus.QUEUED))
    total = gpus.count()
    allocated = gpus.filter(allocated_to__isnull=False).count()
    held = gpus.filter(allocated_to__isnull=True).exclude(held_by_others=[]).count()
    by_status = dict(requests.order_by().values_list("status").annotate(n=Count("id")))
    return {
        "gpu_total": total,
        "gpu_allocated": allocated,
        "gpu_available": total - allocated - held,
        "gpu_held_by_others": held,
        "queue_size": by_status.get(RequestStatus.QUEUED, 0),
        "running": by_status.get(RequestStatus.RUNNING, 0),
        "total_requests": sum(by_status.values()),
        "by_status": {str(s): by_status.get(s, 0) for s in RequestStatus},
    }


def queue_stats_per_host() -> dict:
    hosts = {h.name: queue_stats(host_id=h.pk) for h in Host.objects.order_by("name")}
    return {"total": queue_stats(), "hosts": hosts}
