"""The Spend page: what the models and GPUs cost, by day, grouped by model, loop or person."""

from __future__ import annotations

from datetime import timedelta

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from ledger_app import selectors

PAGE_GROUPS = {"model": "model", "loop": "loop", "user": "person"}
DAYS = 30


def spend_page(request: HttpRequest) -> HttpResponse:
    group_by = request.GET.get("by", "model")
    group_by = group_by if group_by in PAGE_GROUPS else "model"
    since = timezone.now() - timedelta(days=DAYS)
    rows, total = selectors.grouped_with_total(group_by, since=since)
    context = {
        "nav": "spend",
        "group_by": group_by,
        "groups": PAGE_GROUPS,
        "group_word": PAGE_GROUPS[group_by],
        "days": DAYS,
        "rows": rows,
        "total": total,
        # For the chart (static/js/spend_chart.js): each group's dollars per day.
        "by_day": selectors.by_day(group_by, since=since),
    }
    return render(request, "ledger_app/spend.html", context)
