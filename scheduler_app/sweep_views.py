"""Pages for sweeps: the list, and one sweep's table of runs (params against metrics) with its
chart. The sweep page is a shell: static/js/sweep_table.js fills it from
GET /api/sweeps/{id}/table and keeps it live from the agents feed."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from events_app.events import AGENTS_STREAM
from events_app.selectors import last_seq
from scheduler_app import selectors
from scheduler_app.models import RunStatus
from scheduler_app.sweeps.rung_view import rungs_context

PER_PAGE = 50


def sweep_list(request: HttpRequest) -> HttpResponse:
    sweeps = selectors.sweeps().order_by("-created_at", "-id")
    page = Paginator(sweeps, PER_PAGE).get_page(request.GET.get("page"))
    for sweep in page:
        sweep.status = selectors.sweep_status(sweep)
    return render(request, "scheduler_app/sweeps.html", {"nav": "sweeps", "page": page})


def sweep_detail(request: HttpRequest, sweep_id: str) -> HttpResponse:
    feed_after = last_seq(stream=AGENTS_STREAM)  # before the rows: see agents_app.views
    sweep = selectors.sweeps().filter(pk=sweep_id[:40]).first()
    if sweep is None:
        raise Http404(f"No sweep {sweep_id[:40]}")
    sweep.status = selectors.sweep_status(sweep)
    loop = sweep.loop_id
    context = {
        "nav": "sweeps",
        "sweep": sweep,
        "loop_id": loop,
        "feed_after": feed_after,
        # The status filter offers the server's words, so that it never lacks one.
        "statuses": ",".join(RunStatus.values),
        **rungs_context(sweep),
    }
    return render(request, "scheduler_app/sweep.html", context)


def sweep_rungs(request: HttpRequest, sweep_id: str) -> HttpResponse:
    """The sweep page's early-stopping card alone, as htmx refreshes it while runs go on."""
    sweep = selectors.sweeps().filter(pk=sweep_id[:40]).first()
    if sweep is None:
        raise Http404(f"No sweep {sweep_id[:40]}")
    return render(
        request, "scheduler_app/_sweep_rungs.html", {"sweep": sweep, **rungs_context(sweep)}
    )
