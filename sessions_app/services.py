"""Writes for chat sessions."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction

from sessions_app.models import ChatMode, ChatSession


@transaction.atomic
def create_session(
    *, owner=None, title: str = "", mode: str = ChatMode.AUTO, system_prompt: str = ""
) -> ChatSession:
    config = settings.AGENTSYS
    return ChatSession.objects.create(
        owner=owner,
        title=title.strip() or "New chat",
        mode=mode,
        system_prompt=system_prompt,
        model_provider=config.model_provider,
        model_id=config.model_id,
        workdir=str(settings.AGENTSYS_WORKDIR),
        project=config.project,
    )


def set_archived(*, session_ids: list[str], archived: bool) -> int:
    return ChatSession.objects.filter(pk__in=session_ids).update(archived=archived)
