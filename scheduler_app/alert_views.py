"""The alerts inbox: what the runs and agents raised, live, with the answers each offers
(acknowledge, stop what raised it)."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from events_app.events import AGENTS_STREAM
from events_app.selectors import last_seq
from scheduler_app import services
from scheduler_app.models import Alert, AlertSeverity, AlertStatus

SHOWN = 200


def inbox(request: HttpRequest) -> HttpResponse:
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
    for alert in alerts:
        alert.offered = alert.choices or ["acknowledge"]
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
    context["feed_after"] = last_seq(stream=AGENTS_STREAM)
    return render(request, "scheduler_app/alerts.html", context)


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
