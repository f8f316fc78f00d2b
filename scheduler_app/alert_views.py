"""The alerts inbox: what the runs and agents raised, live, with the answers each offers
(acknowledge, stop what raised it)."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from agents_app.models import Agent
from agentsys.types import TERMINAL_AGENT_STATUSES, EndState
from events_app.events import AGENTS_STREAM
from events_app.selectors import last_seq
from scheduler_app import services
from scheduler_app.models import Alert, AlertSeverity, AlertStatus

SHOWN = 200
ENDED_RUN = frozenset(state.value for state in EndState)


def inbox(request: HttpRequest) -> HttpResponse:
    feed_after = last_seq(stream=AGENTS_STREAM)  # before the rows: see agents_app.views
    show = request.GET.get("show", "open")
    severity = request.GET.get("severity", "")
    found = Alert.objects.select_related("run", "responded_by").order_by("-created_at")
    if show != "all":
        show = "open"
        found = found.filter(status=AlertStatus.PENDING)
    if severity in AlertSeverity.values:
        found = found.filter(severity=severity)
    else:
        severity = ""
    alerts = list(found[:SHOWN])
    _mark_ended(alerts)
    context = {
        "nav": "alerts",
        "alerts": alerts,
        "show": show,
        "severity": severity,
        "severities": AlertSeverity.choices,
        "open_total": Alert.objects.filter(status=AlertStatus.PENDING).count(),
        "query": request.GET.urlencode(),
    }
    if request.headers.get("HX-Request"):  # the live refresh: the list, and the count (oob)
        return render(request, "scheduler_app/_alert_list.html", {**context, "oob": True})
    context["feed_after"] = feed_after
    return render(request, "scheduler_app/alerts.html", context)


def _mark_ended(alerts: list[Alert]) -> None:
    """Each alert's answers, without Stop once what raised it has ended: a finished run has
    nothing left to stop, and a red button there would say otherwise."""
    agent_ids = {a.agent_id for a in alerts if a.agent_id and not a.run_id}
    ended_agents = set(
        Agent.objects.filter(pk__in=agent_ids, status__in=TERMINAL_AGENT_STATUSES).values_list(
            "pk", flat=True
        )
    )
    for alert in alerts:
        if alert.run_id:
            alert.ended = alert.run.status in ENDED_RUN
        else:
            alert.ended = alert.agent_id in ended_agents
        offered = alert.choices or ["acknowledge"]
        if alert.ended:
            offered = [c for c in offered if c != "stop"] or ["acknowledge"]
        alert.offered = offered


@require_POST
def respond(request: HttpRequest, alert_id: str) -> HttpResponse:
    response = request.POST.get("response", "")[:200]
    back = request.POST.get("next", "")
    try:
        alert = services.answer_alert(alert_id=alert_id, response=response, user=request.user)
    except Alert.DoesNotExist:
        raise Http404("No such alert") from None
    except services.ServiceError as error:
        messages.error(request, str(error))
    else:
        done = "stopped what raised it" if response == "stop" else f"answered “{response}”"
        about = f"on the run “{alert.run.name[:80]}”" if alert.run_id else f"from {alert.agent_id}"
        messages.success(request, f"Alert {about}: {done}.")
    return redirect(reverse("alerts") + (f"?{back}" if back else ""))
