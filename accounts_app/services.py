"""Writes for API tokens: create (the only moment the token is seen), revoke, note a use;
agents' tokens: issued to a research loop at its start (acting for the person who started
it), revoked at its end; and a person's default budget."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from accounts_app.models import ApiToken, PersonSettings
from agentsys.research.budget import checked as checked_budget

TOKEN_PREFIX = "ast_"  # noqa: S105 - makes a leaked token easy to recognise (secret scanners, logs)
PREFIX_SHOWN = 10
# last_used_at is written at most this often per token: not one write per request.
LAST_USED_RESOLUTION = timedelta(minutes=1)
# Owner of an agent's token when no person started its loop: made on demand, no password (it
# cannot log in), not staff.
AGENTS_USERNAME = "agents"


class TokenError(Exception):
    """The token operation cannot be done (the message says why)."""


def digest_of(token: str) -> str:
    # A 256-bit random token needs no slow hash: nothing to brute-force.
    return hashlib.sha256(token.encode()).hexdigest()


def create_token(*, user, name: str) -> tuple[ApiToken, str]:
    """A new token for `user`; returns the row and the token, which is never stored."""
    name = (name or "").strip()
    if not name:
        raise TokenError("a token needs a name")
    if len(name) > 100:
        raise TokenError("a token's name has at most 100 characters")
    if not user.is_active:
        raise TokenError(f"user {user.get_username()} is inactive")
    if user.get_username() == AGENTS_USERNAME:
        raise TokenError("the agents' tokens are issued to their loops, one each, not made")
    row = ApiToken(user=user, name=name)
    token = fill_new_secret(row)
    row.save()
    return row, token


def fill_new_secret(row: ApiToken) -> str:
    """Give an unsaved row a fresh token's prefix and digest; returns the token."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    row.prefix, row.digest = token[:PREFIX_SHOWN], digest_of(token)
    return token


def revoke_token(*, token_id: int) -> ApiToken:
    row = ApiToken.objects.filter(pk=token_id).first()
    if row is None:
        raise TokenError(f"no API token with id {token_id}")
    if row.revoked_at is None:
        row.revoked_at = timezone.now()
        row.save(update_fields=["revoked_at"])
    return row


def agents_user():
    """The service user that agents' tokens belong to, made on first use. An account of that
    name that a person could log in with is refused: it would see and own the agents' tokens."""
    user, _ = get_user_model().objects.get_or_create(
        username=AGENTS_USERNAME, defaults={"password": make_password(None)}
    )
    if user.has_usable_password() or user.is_staff or user.is_superuser:
        raise TokenError(
            f"user {AGENTS_USERNAME!r} is a person's account (it has a password or is staff): "
            "agents' tokens cannot belong to it"
        )
    return user


@transaction.atomic
def issue_agent_token(*, agent_id: str, owner=None) -> tuple[ApiToken, str]:
    """A new token of agent `agent_id`, acting for `owner` (the person who started the loop;
    None: the agents service user); its earlier ones (a loop resumed) are revoked. Returns
    the row and the token, which is never stored."""
    if not agent_id or len(agent_id) > 64:
        raise TokenError(f"an agent's token needs the agent's id, got {agent_id!r}")
    revoke_agent_tokens(agent_id=agent_id)
    # The person's user, so that it reads what they may read; what it may change is narrower
    # than theirs (scheduler_app.loop_scope), since a model reading untrusted text drives it.
    user = owner if owner is not None else agents_user()
    row = ApiToken(user=user, name=f"agent {agent_id}", agent_id=agent_id)
    token = fill_new_secret(row)
    row.save()
    return row, token


def revoke_agent_tokens(*, agent_id: str) -> int:
    """Revoke every live token of agent `agent_id` (it ended); returns how many."""
    live = ApiToken.objects.filter(agent_id=agent_id, revoked_at__isnull=True)
    return live.update(revoked_at=timezone.now()) if agent_id else 0


def note_use(row: ApiToken) -> None:
    """Record that `row` authenticated a request, at most once a minute."""
    now = timezone.now()
    if row.last_used_at is not None and now - row.last_used_at < LAST_USED_RESOLUTION:
        return
    stale = Q(last_used_at__isnull=True) | Q(last_used_at__lt=now - LAST_USED_RESOLUTION)
    # Conditional: of many requests at once, one writes.
    ApiToken.objects.filter(stale, pk=row.pk).update(last_used_at=now)


class BudgetRefused(ValueError):
    """A default budget that cannot be saved (the message says which cap and why)."""


def set_default_budget(*, user, budget: dict | None) -> dict:
    """The default budget of the loops `user` starts ({} or None: none); returns it as
    saved. Raises BudgetRefused saying what is wrong."""
    try:
        budget = checked_budget(budget)
    except (TypeError, ValueError) as error:
        raise BudgetRefused(str(error)) from None
    PersonSettings.objects.update_or_create(user=user, defaults={"default_budget": budget})
    return budget
