"""Reads for API tokens and a person's settings."""

from __future__ import annotations

from django.db.models import QuerySet

from accounts_app.models import ApiToken, PersonSettings
from accounts_app.services import TOKEN_PREFIX, digest_of


def active_token(token: str | None) -> ApiToken | None:
    """The live token row for `token` (owner active, not revoked), or None."""
    if not token or not token.startswith(TOKEN_PREFIX) or len(token) > 200:
        return None
    # Looked up by digest: equal digests mean equal tokens, and the lookup leaks no timing
    # about the token itself.
    return (
        ApiToken.objects.select_related("user")
        .filter(digest=digest_of(token), revoked_at__isnull=True, user__is_active=True)
        .first()
    )


def tokens(*, username: str | None = None, people_only: bool = False) -> QuerySet[ApiToken]:
    """Tokens, of one user if named; `people_only` leaves agents' tokens out."""
    rows = ApiToken.objects.select_related("user").order_by("user__username", "-created_at")
    if people_only:
        rows = rows.filter(agent_id="")
    return rows.filter(user__username=username) if username else rows


def default_budget(user) -> dict:
    """The default budget of the loops `user` starts ({}: none; no one logged in: none)."""
    if user is None or not getattr(user, "is_authenticated", False):
        return {}
    row = PersonSettings.objects.filter(user=user).values("default_budget").first()
    return dict(row["default_budget"] or {}) if row else {}
