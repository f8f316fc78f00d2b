"""Reads for chat sessions."""

from __future__ import annotations

from django.db.models import QuerySet

from sessions_app.models import ChatSession


def sessions_for(*, user, include_archived: bool = False) -> QuerySet[ChatSession]:
    """Sessions a caller may see: a person's own and the ones no person owns (made by
    scripts with the API token). The token caller (user=None) sees all of them."""
    sessions = ChatSession.objects.all()
    if user is not None:
        sessions = sessions.filter(owner__isnull=True) | sessions.filter(owner=user)
    if not include_archived:
        sessions = sessions.filter(archived=False)
    return sessions.order_by("-updated_at")
