"""PostgreSQL stores no NUL character (U+0000) in text or JSON. A request that carries one in
its path, query string or JSON body is answered 400 here, saying where, instead of failing
with a 500 at the database. What agents write goes through `json_safe`, which replaces it."""

from __future__ import annotations

import json

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, JsonResponse
from django.utils.deprecation import MiddlewareMixin


class RejectNulCharacters(MiddlewareMixin):
    def process_request(self, request: HttpRequest):
        try:
            where = nul_location(request)
        except RequestDataTooBig:  # the first to read the body says why, not a bare 400
            limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
            return JsonResponse(
                {
                    "detail": f"The request body is over the {limit // 1024} KiB this server "
                    "takes (DATA_UPLOAD_MAX_MEMORY_SIZE): send less at once, e.g. fewer runs "
                    "per POST /api/runs/batch"
                },
                status=413,
            )
        if where is None:
            return None
        return JsonResponse(
            {"detail": f"NUL characters (\\u0000) are not allowed in the {where}"}, status=400
        )


def nul_location(request: HttpRequest) -> str | None:
    if "\x00" in request.path:
        return "path"
    if any("\x00" in key or "\x00" in value for key, value in request.GET.items()):
        return "query string"
    if request.content_type == "application/json" and _json_has_nul(request.body):
        return "request body"
    return None


def _json_has_nul(body: bytes) -> bool:
    if b"\\u0000" not in body and b"\x00" not in body:
        return False  # the common case costs one scan of the bytes
    try:
        return _has_nul(json.loads(body))
    except (ValueError, RecursionError):
        return b"\x00" in body  # unreadable JSON: the view says so, unless it holds a NUL


def _has_nul(value) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_nul(v) for v in value)
    return False
