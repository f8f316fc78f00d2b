"""Writes for chat sessions."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from agents_app.models import Agent
from agents_app.services import AgentCommandRefused, request_agent_command
from agentsys.research.budget import checked as checked_budget
from agentsys.types import LIVE_AGENT_STATUSES, CommandKind
from sessions_app.models import ChatMode, ChatSession
from sessions_app.turns import stop_turn


@transaction.atomic
def create_session(
    *,
    owner=None,
    title: str = "",
    mode: str = ChatMode.AUTO,
    system_prompt: str = "",
    model_provider: str = "",
    model_id: str = "",
) -> ChatSession:
    """A new chat; the model is the configured default unless one is given."""
    config = settings.AGENTSYS
    return ChatSession.objects.create(
        owner=owner,
        title=title.strip() or "New chat",
        mode=mode,
        system_prompt=system_prompt,
        model_provider=model_provider.strip() or config.model_provider,
        model_id=model_id.strip() or config.model_id,
        workdir=str(settings.AGENTSYS_WORKDIR),
        project=config.project,
    )


def set_archived(*, session_ids: list[str], archived: bool) -> int:
    return ChatSession.objects.filter(pk__in=session_ids).update(archived=archived)


@transaction.atomic
def rename_session(*, session: ChatSession, title: str) -> ChatSession:
    session.title = title.strip()
    session.save(update_fields=["title", "updated_at"])
    return session


@transaction.atomic
def set_model(*, session: ChatSession, model_provider: str, model_id: str) -> ChatSession:
    """The model the session's next turns use (the running turn keeps its own)."""
    session.model_provider, session.model_id = model_provider.strip(), model_id.strip()
    session.save(update_fields=["model_provider", "model_id", "updated_at"])
    return session


@transaction.atomic
def set_system_prompt(*, session: ChatSession, system_prompt: str) -> ChatSession:
    session.system_prompt = system_prompt
    session.save(update_fields=["system_prompt", "updated_at"])
    return session


class BudgetRefused(ValueError):
    """A default budget that cannot be saved (the message says which cap and why)."""


@transaction.atomic
def set_default_budget(*, session: ChatSession, budget: dict | None) -> ChatSession:
    """The default budget of the loops the session starts from now on ({} or None: none);
    loops already going keep theirs. Raises BudgetRefused saying what is wrong."""
    try:
        session.default_budget = checked_budget(budget)
    except (TypeError, ValueError) as error:
        raise BudgetRefused(str(error)) from None
    session.save(update_fields=["default_budget", "updated_at"])
    return session


@transaction.atomic
def delete_session(*, session: ChatSession, user=None) -> None:
    """DELETE /api/sessions/{id}: archive the session (its history stays, for the admin),
    stop what still works for it, and end its live turn.

    - Each live agent of the session (idle, running or paused) whose parent is not itself a
      live agent of the session gets a STOP command; the daemon cascades a stop to the
      children. An agent that finished meanwhile refuses the command: nothing to do.
    - Its live turn is stopped (sessions_app.turns.stop_turn): a queued one at once, a
      streaming one by its daemon, whose L1 agent (stopped with the rest) aborts its
      OpenCode session on the way out.
    """
    ChatSession.objects.filter(pk=session.pk).update(archived=True, updated_at=timezone.now())
    session.archived = True
    stop_turn(session=session)
    live = Agent.objects.filter(chat_session=session, status__in=LIVE_AGENT_STATUSES)
    roots = live.exclude(
        Q(parent__chat_session=session) & Q(parent__status__in=LIVE_AGENT_STATUSES)
    )
    for agent_id in roots.order_by("created_at").values_list("id", flat=True):
        try:
            with transaction.atomic():  # a refusal rolls back only its own savepoint
                request_agent_command(agent_id=agent_id, kind=CommandKind.STOP, user=user)
        except (AgentCommandRefused, Agent.DoesNotExist):
            pass
