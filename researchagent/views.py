from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.templatetags.static import static

from events_app.events import AGENTS_STREAM
from events_app.selectors import last_seq
from researchagent import selectors


def home(request: HttpRequest) -> HttpResponse:
    feed_after = last_seq(stream=AGENTS_STREAM)  # before the rows: see agents_app.views
    context = {"nav": "home", "overview": selectors.system_overview()}
    if request.GET.get("part") == "body" and request.headers.get("HX-Request"):
        return render(request, "_overview.html", context)
    context["feed_after"] = feed_after
    return render(request, "home.html", context)


@login_not_required
def favicon(request: HttpRequest) -> HttpResponse:
    """Browsers ask for /favicon.ico whatever the page links (the admin, the API docs, a
    bookmark): send them to the app's icon, the one base.html links."""
    response = HttpResponseRedirect(static("favicon.svg"))
    response["Cache-Control"] = "max-age=86400"
    return response
