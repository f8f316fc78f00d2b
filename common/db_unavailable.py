"""While PostgreSQL is down (or restarting), the web answers 503 with a clear message instead
of a 500 and a traceback: JSON `{"detail": ...}` under /api/, a plain page elsewhere, both
with Retry-After, and the page carries the banner that says since when. Once the web's watch
(common/db_watch.py) knows the database is away, every request but /api/health is answered so
at once, before anything could wait on a connection; the first request after its return is
served normally.

A view's error reaches `process_exception`. An error in another middleware (the session or
the user loaded by the login check) has already become a 500 response by the time it
reaches this one; the `got_request_exception` signal, sent just before that, marks the
request, and the 500 is replaced on the way out. Hence: first in MIDDLEWARE but for the
security and static-file ones, which never touch the database.
"""

from __future__ import annotations

import logging
import sys

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.core.signals import got_request_exception
from django.http import HttpResponse, JsonResponse
from django.utils.html import escape

from common.api_contract import API_PREFIX
from common.db_outage import is_database_unavailable, outage

MESSAGE = "The database is unavailable right now; try again in a few seconds."
RETRY_AFTER_SECONDS = 5
HEALTH_PATH = f"{API_PREFIX}health"  # says the outage itself (researchagent/health.py)
# Standalone: a page that extends base.html would load the session and the user, from the
# database that is away. The banner is styled as the base template's (static/css/app.css).
PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Database unavailable</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="refresh" content="{retry}"><link rel="stylesheet" href="{css}"></head>
<body><div class="banner" role="alert" id="database-banner">{banner}</div>
<main><h1>Database unavailable</h1><p>This page reloads by itself every {retry} seconds.</p>
<p>Runs and agents go on meanwhile; what they report is stored once the database is back.</p>
</main></body></html>
"""
_MARK = "_agentsys_database_unavailable"


def _page(message: str) -> str:
    from django.templatetags.static import static

    try:
        css = static("css/app.css")
    except ValueError:  # no collected manifest (a test without collectstatic): no style
        css = ""
    return PAGE.format(retry=RETRY_AFTER_SECONDS, css=escape(css), banner=escape(message))


def unavailable_response(request) -> HttpResponse:
    message = outage.describe() or MESSAGE
    if request.path_info.startswith(API_PREFIX):
        response = JsonResponse({"detail": message}, status=503)
    else:
        response = HttpResponse(_page(message), status=503, content_type="text/html; charset=utf-8")
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


def _mark_request(sender, request=None, **kwargs) -> None:
    if request is not None and is_database_unavailable(sys.exc_info()[1]):
        setattr(request, _MARK, True)


got_request_exception.connect(_mark_request, dispatch_uid="agentsys.database_unavailable")


def _not_an_outage_traceback(record: logging.LogRecord) -> bool:
    """Drop django.request's "Internal Server Error" traceback for an outage: the request
    is answered 503 and logged as such, one line."""
    error = record.exc_info[1] if record.exc_info else None
    return not (record.levelno >= logging.ERROR and is_database_unavailable(error))


logging.getLogger("django.request").addFilter(_not_an_outage_traceback)


def _known_down(request) -> bool:
    """The database is known to be away (common/db_watch.py): answer now, without a wait for
    a connection that cannot come. Health answers too, saying so."""
    return outage.since is not None and request.path_info != HEALTH_PATH


def _quiet(response: HttpResponse) -> HttpResponse:
    # The watch logged the outage once; a line per request answered meanwhile would bury it.
    response._has_been_logged = True
    return response


class DatabaseUnavailableMiddleware:
    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        self.async_mode = iscoroutinefunction(get_response)
        if self.async_mode:
            markcoroutinefunction(self)

    def __call__(self, request):
        if self.async_mode:
            return self._acall(request)
        if _known_down(request):
            return _quiet(unavailable_response(request))
        return self._checked(request, self.get_response(request))

    async def _acall(self, request):
        if _known_down(request):
            return _quiet(unavailable_response(request))
        return self._checked(request, await self.get_response(request))

    def process_exception(self, request, exception):
        if is_database_unavailable(exception):
            return unavailable_response(request)
        return None

    @staticmethod
    def _checked(request, response):
        if response.status_code == 500 and getattr(request, _MARK, False):
            return unavailable_response(request)
        return response
