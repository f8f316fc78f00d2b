"""Cross-app read models for the dashboard."""

from __future__ import annotations

from django.db.models import Count

from agents_app.models import Agent
from scheduler_app import selectors as scheduler_selectors
from scheduler_app.models import Alert, AlertStatus, Run
from sessions_app.models import ChatSession


def system_overview() -> dict:
    agents_by_status = dict(
        Agent.objects.order_by()
        .values_list("status")
        .annotate(n=Count("id"))
        .values_list("status", "n")
    )
    return {
        "hosts": scheduler_selectors.hosts_with_gpus(),
        "agents_by_status": agents_by_status,
        "agent_total": sum(agents_by_status.values()),
        "sessions": ChatSession.objects.filter(archived=False)[:10],
        "recent_runs": Run.objects.all()[:10],
        "open_alerts": Alert.objects.filter(status=AlertStatus.PENDING)[:10],
    }
