"""Pages for runs: the list (filters, search), a run (live log, live charts, actions) and
compare (one metric of several runs overlaid). Live data comes from the REST API and the
agents WebSocket feed in the browser (static/js/run_page.js); these views render the rest."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from events_app.events import AGENTS_STREAM
from events_app.selectors import last_seq
from ledger_app import selectors as ledger
from scheduler_app import queue_board, selectors, services
from scheduler_app.models import Run, RunStatus, ScheduleRequest
from scheduler_app.runs import launch as runs

ACTIONS = {
    "stop": (runs.stop_run, "Stop requested: the run's processes are being ended."),
    "cancel": (runs.stop_run, "Cancelled: the run left the queue."),
    "start": (runs.start_run, "Queued."),
    "rerun": (runs.rerun, "Started again as a new run."),
}
PARTS = {"head": "scheduler_app/_run_head.html", "alerts": "scheduler_app/_run_alerts.html"}


def run_list(request: HttpRequest) -> HttpResponse:
    feed_after = last_seq(stream=AGENTS_STREAM)  # before the rows: see agents_app.views
    q = request.GET.get("q", "").strip()[:200]
    status = request.GET.get("status", "")
    if status not in RunStatus.values:
        status = ""
    context = {
        "nav": "runs",
        "runs": selectors.run_list(q=q, status=status, sweep_id=request.GET.get("sweep", "")[:40]),
        "q": q,
        "status": status,
        "statuses": RunStatus.choices,
        "feed_after": feed_after,
    }
    if request.headers.get("HX-Request"):  # the filters: only the rows change
        return render(request, "scheduler_app/_run_rows.html", context)
    return render(request, "scheduler_app/runs.html", context)


def run_detail(request: HttpRequest, run_id: str) -> HttpResponse:
    feed_after = last_seq(stream=AGENTS_STREAM)  # before the rows: see agents_app.views
    run = selectors.run_page(run_id)
    if run is None:
        raise Http404(f"No run {run_id}")
    context = {
        "nav": "runs",
        "run": run,
        "live": run.status in RunStatus.open(),
        "duration": selectors.run_duration(run),
        "run_gpu": ledger.run_gpu(run.pk),
    }
    part = request.GET.get("part", "")
    if part in PARTS and request.headers.get("HX-Request"):  # the page refreshing a section
        return render(request, PARTS[part], context)
    context["feed_after"] = feed_after
    return render(request, "scheduler_app/run.html", context)


@require_POST
def run_action(request: HttpRequest, run_id: str, action: str) -> HttpResponse:
    if action not in ACTIONS or not Run.objects.filter(pk=run_id).exists():
        raise Http404("No such run or action")
    do, done = ACTIONS[action]
    try:
        result = do(run_id=run_id)
    except runs.RunRefused as error:
        messages.error(request, str(error))
        return redirect("run", run_id=run_id)
    messages.success(request, done)
    return redirect("run", run_id=result.pk if isinstance(result, Run) else run_id)


def compare(request: HttpRequest) -> HttpResponse:
    ids = [i for i in request.GET.getlist("ids") if i][:50]
    if not ids and request.GET.get("sweep"):
        ids = [run.pk for run in selectors.run_list(sweep_id=request.GET["sweep"][:40], limit=50)]
    found = {run.pk: run for run in Run.objects.filter(pk__in=ids)}
    chosen = [found[i] for i in ids if i in found]
    keys = selectors.shared_keys([run.pk for run in chosen])
    key = request.GET.get("key") or (keys[0] if keys else "loss")
    context = {"nav": "runs", "runs": chosen, "keys": keys, "key": key}
    return render(request, "scheduler_app/compare.html", context)


def queue(request: HttpRequest) -> HttpResponse:
    feed_after = last_seq(stream=AGENTS_STREAM)  # before the rows: see agents_app.views
    context = {"nav": "queue", **queue_board.queue_board()}
    if request.headers.get("HX-Request"):  # the live refresh: only the board
        return render(request, "scheduler_app/_queue_board.html", context)
    context["feed_after"] = feed_after
    context["people_spent"] = ledger.people_this_week()
    return render(request, "scheduler_app/queue.html", context)


@require_POST
def queue_cancel(request: HttpRequest, request_id: str) -> HttpResponse:
    row = ScheduleRequest.objects.filter(pk=request_id).first()
    if row is None:
        raise Http404("No such request")
    name = _request_name(row)
    try:
        services.cancel_request(request_id=request_id)
    except ScheduleRequest.DoesNotExist:
        raise Http404("No such request") from None
    except services.ServiceError:
        row.refresh_from_db()
        messages.error(
            request,
            f"{name} was not cancelled: it is {row.status}; only queued requests can be cancelled.",
        )
    else:
        messages.success(request, f"Cancelled {name}: it left the queue.")
    return redirect("queue")


def _request_name(row: ScheduleRequest) -> str:
    """A queue request as a person knows it: its run's name, else its goal (not `sched-…`)."""
    name = Run.objects.filter(agent_id=row.agent_id).values_list("name", flat=True).first()
    text = " ".join((name or row.goal or "").split())
    if not text:
        return "the request"
    return f"“{text[:80]}”" if len(text) <= 80 else f"“{text[:79]}…”"
