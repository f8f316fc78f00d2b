"""Every error answered under /api/ is JSON `{"detail": "<one readable line>"}`, whoever
produced it: Django's HTML page for a path no route matches, ninja's plain-text 405, the empty
405 of the event stream (a view outside ninja). A script parses one shape whatever went wrong;
the headers that tell it what to do next (Allow, Retry-After) are kept."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.deprecation import MiddlewareMixin

from common.api_contract import API_PREFIX

KEPT_HEADERS = ("Allow", "Retry-After", "WWW-Authenticate")


class ApiErrorsAsJson(MiddlewareMixin):
    def process_response(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        if (
            response.status_code < 400
            or response.streaming
            or not request.path_info.startswith(API_PREFIX)
            or response.get("Content-Type", "").startswith("application/json")
        ):
            return response
        answer = JsonResponse({"detail": _detail(request, response)}, status=response.status_code)
        for header in KEPT_HEADERS:
            if header in response:
                answer[header] = response[header]
        return answer


def _detail(request: HttpRequest, response: HttpResponse) -> str:
    if response.status_code == 404:
        return f"No API route {request.path!r}; the routes are listed at /api/docs"
    if response.status_code == 405:
        allowed = response.get("Allow", "")
        return f"{request.method} is not allowed on {request.path}; it takes {allowed}".strip()
    return response.reason_phrase
