"""Authentication: pages need a logged-in user; the API takes a session or the API token."""

from __future__ import annotations

import secrets

from django.conf import settings
from django.contrib.auth.middleware import LoginRequiredMiddleware as _DjangoLoginRequired
from django.http import HttpRequest
from ninja.security import APIKeyHeader, HttpBearer, django_auth

API_PREFIX = "/api/"


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


class TokenHeaderAuth(APIKeyHeader):
    """`X-Auth-Token: <token>`"""

    param_name = "X-Auth-Token"

    def authenticate(self, request: HttpRequest, key: str | None):
        return "token" if token_matches(key) else None


class BearerTokenAuth(HttpBearer):
    """`Authorization: Bearer <token>`"""

    def authenticate(self, request: HttpRequest, token: str):
        return "token" if token_matches(token) else None


# Tried in order; the session one also enforces CSRF on unsafe methods.
API_AUTH = [TokenHeaderAuth(), BearerTokenAuth(), django_auth]
