"""Authentication: pages need a logged-in user; the API takes a session, a user's own API
token (accounts_app), or the deployment-wide RESEARCH_AGENT_USER_AUTH_TOKEN.

An agent's token (a research loop's own) acts as the person who started the loop (the
`agents` service user when none did), with the agent's id on the request (`agent_of(request)`).
It may change only what common.api_contract's AGENT_WRITES allows (any other write is a 403
saying so), and of that only the runs and sweeps of its own loop (scheduler_app.loop_scope)."""

from __future__ import annotations

import functools
import secrets

from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth.middleware import LoginRequiredMiddleware as _DjangoLoginRequired
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, JsonResponse
from ninja.errors import AuthorizationError, HttpError
from ninja.security import APIKeyHeader, HttpBearer, django_auth

from common.api_contract import AGENT_REFUSED, API_PREFIX, agent_may

ENV_TOKEN = "token"  # noqa: S105 - what request.auth is for the environment's token (it has no owner)


class LoginRequiredMiddleware(_DjangoLoginRequired):
    """Django's login-by-default, except for /api/, whose auth answers 401 instead of a redirect."""

    def process_view(self, request, view_func, view_args, view_kwargs):
        if request.path_info.startswith(API_PREFIX):
            return None
        return super().process_view(request, view_func, view_args, view_kwargs)


def token_matches(candidate: str | None) -> bool:
    """Constant-time check against RESEARCH_AGENT_USER_AUTH_TOKEN; no token configured = no."""
    expected = settings.AGENTSYS.api_token
    if not expected or not candidate:
        return False
    return secrets.compare_digest(candidate.encode(), expected.encode())


def live_token(candidate: str | None):
    """The live ApiToken row `candidate` is (noting the use), or None."""
    from accounts_app import selectors, services

    row = selectors.active_token(candidate)
    if row is not None:
        services.note_use(row)
    return row


def authenticate_token(request: HttpRequest | None, candidate: str | None):
    """A user's token: sets request.user to its owner (request.agent_id to its agent's id,
    for an agent's token) and returns the user. The env token: returns ENV_TOKEN. Anything
    else: None. An agent's token on a write it may not make raises a 403."""
    if token_matches(candidate):
        return ENV_TOKEN
    row = live_token(candidate)
    if row is None:
        return None
    if request is not None:
        if row.agent_id and not agent_may(request.method or "", request.path_info):
            raise AuthorizationError(message=AGENT_REFUSED)
        request.user, request.agent_id = row.user, row.agent_id
    return row.user


def agent_of(request: HttpRequest) -> str:
    """The id of the agent whose token made `request`; "" for anyone else."""
    return getattr(request, "agent_id", "")


@database_sync_to_async
def token_accepted(candidate: str | None) -> bool:
    """For the WebSocket and SSE feeds (async): is `candidate` a token the API accepts?"""
    return authenticate_token(None, candidate) is not None


@database_sync_to_async
def token_caller(candidate: str | None):
    """For the WebSocket feeds (async): whom `candidate` acts as, as the API has it: its user
    (a loop's token: the person who started the loop), ENV_TOKEN, or None (refused)."""
    return authenticate_token(None, candidate)


class TokenHeaderAuth(APIKeyHeader):
    """`X-Auth-Token: <token>`"""

    param_name = "X-Auth-Token"

    def authenticate(self, request: HttpRequest, key: str | None):
        return authenticate_token(request, key)


class BearerTokenAuth(HttpBearer):
    """`Authorization: Bearer <token>`"""

    def authenticate(self, request: HttpRequest, token: str):
        return authenticate_token(request, token)


# Tried in order; the session one also enforces CSRF on unsafe methods.
API_AUTH = [TokenHeaderAuth(), BearerTokenAuth(), django_auth]


def docs_access(view):
    """Guard for the schema and docs views: the API's own credentials (accounts_app.auth
    API_AUTH: token header, bearer token, session). A browser without a session goes to the
    login page; anything else gets the API's 401."""

    @functools.wraps(view)
    def guarded(request: HttpRequest, *args, **kwargs):
        try:
            accepted = any(auth(request) for auth in API_AUTH)
        except HttpError as refused:  # an agent's token on a write
            return JsonResponse({"detail": str(refused)}, status=refused.status_code)
        if accepted:
            return view(request, *args, **kwargs)
        if request.path.endswith(".json") or "text/html" not in request.headers.get("Accept", ""):
            return JsonResponse({"detail": "Unauthorized"}, status=401)
        return redirect_to_login(request.get_full_path())

    return guarded
