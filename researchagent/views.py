from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from agents_app.events import AGENTS_STREAM
from agents_app.selectors import last_seq
from researchagent import selectors


def home(request: HttpRequest) -> HttpResponse:
    context = {"nav": "home", "overview": selectors.system_overview()}
    if request.GET.get("part") == "body" and request.headers.get("HX-Request"):
        return render(request, "_overview.html", context)
    context["feed_after"] = last_seq(stream=AGENTS_STREAM)
    return render(request, "home.html", context)
