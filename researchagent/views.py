from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from researchagent import selectors


def home(request: HttpRequest) -> HttpResponse:
    return render(request, "home.html", {"overview": selectors.system_overview()})
