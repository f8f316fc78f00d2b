"""Reads for chat sessions."""

from __future__ import annotations

from django.db.models import Case, CharField, Exists, OuterRef, Q, QuerySet, Subquery, Value, When

from agents_app.models import Agent
from agentsys.types import (
    LIVE_AGENT_STATUSES,
    LIVE_TURN_STATUSES,
    TERMINAL_AGENT_STATUSES,
    AgentRole,
)
from events_app.events import chat_stream
from events_app.selectors import last_seq
from scheduler_app.models import Alert
from sessions_app.models import ChatMessage, ChatSession, ChatTurn

QUESTIONABLE_TURN_STATUSES = ("stopped", "interrupted")
FAILED_AGENT_STATUSES = ("failed", "rejected")
QUESTIONABLE_AGENT_STATUSES = ("stopped", "cancelled", "lost")

MESSAGES_LIMIT_DEFAULT = 200
MESSAGES_LIMIT_MAX = 2000


def sessions_for(*, user, include_archived: bool = False) -> QuerySet[ChatSession]:
    """Sessions a caller may see: a person's own and the ones no person owns (made by
    scripts with the API token). The token caller (user=None) sees all of them."""
    sessions = ChatSession.objects.all()
    if user is not None:
        sessions = sessions.filter(owner__isnull=True) | sessions.filter(owner=user)
    if not include_archived:
        sessions = sessions.filter(archived=False)
    return sessions.order_by("-updated_at")


def caller_of(request):
    """Whose sessions an API request may see: the API token stands for the operator (all of
    them, user None), a logged-in session or a personal token for its user."""
    return None if request.auth == "token" else request.user


def visible_session(request, session_id: str) -> ChatSession | None:
    """The session `session_id` if the caller may see it (archived too), else None."""
    return (
        sessions_for(user=caller_of(request), include_archived=True).filter(pk=session_id).first()
    )


def with_status(sessions: QuerySet[ChatSession]) -> QuerySet[ChatSession]:
    """Annotate each session with `status`, in the same SQL query (EXISTS / scalar
    subqueries, served by the chat_session and session indexes: no query per session).

    The rule, first match wins:
    - "awaiting_human": an open alert (pending, offering `choices` to answer) concerns an
      agent of the session;
    - "running": a turn of the session is running or queued, or an agent of the session is
      live (idle, running or paused);
    - "failed": the session's most recent turn failed, or its most recently finished agent
      failed (or was rejected by the queue);
    - "questionable": that turn was stopped or interrupted, or that agent was stopped,
      cancelled or lost (it ended without a verdict);
    - "done": that agent finished done (the shared end word for a success);
    - "idle": otherwise (nothing ran yet, or only chat turns that ended well).
    """
    session = OuterRef("pk")
    # The session's own L1 agent lives as long as the chat: only the work it started counts.
    work = Agent.objects.filter(chat_session=session).exclude(role=AgentRole.ORCHESTRATOR)
    asking = Alert.objects.filter(status="pending").exclude(choices=[]).values("agent_id")
    awaiting = Exists(work.filter(id__in=asking))
    live_turn = Exists(ChatTurn.objects.filter(session=session, status__in=LIVE_TURN_STATUSES))
    live_agent = Exists(work.filter(status__in=LIVE_AGENT_STATUSES))
    last_turn = Subquery(
        ChatTurn.objects.filter(session=session).order_by("-started_at").values("status")[:1]
    )
    last_agent = Subquery(
        work.filter(status__in=TERMINAL_AGENT_STATUSES)
        .order_by("-finished_at", "-updated_at")
        .values("status")[:1]
    )
    sessions = sessions.annotate(
        _awaiting=awaiting,
        _live_turn=live_turn,
        _live_agent=live_agent,
        _last_turn=last_turn,
        _last_agent=last_agent,
    )
    return sessions.annotate(
        status=Case(
            When(_awaiting=True, then=Value("awaiting_human")),
            When(Q(_live_turn=True) | Q(_live_agent=True), then=Value("running")),
            When(
                Q(_last_turn="failed") | Q(_last_agent__in=FAILED_AGENT_STATUSES),
                then=Value("failed"),
            ),
            When(
                Q(_last_turn__in=QUESTIONABLE_TURN_STATUSES)
                | Q(_last_agent__in=QUESTIONABLE_AGENT_STATUSES),
                then=Value("questionable"),
            ),
            When(_last_agent="done", then=Value("done")),
            default=Value("idle"),
            output_field=CharField(),
        )
    )


def session_list(
    *, user, include_archived: bool = False, q: str | None = None
) -> QuerySet[ChatSession]:
    """GET /api/sessions: most recently active first, each with its status."""
    sessions = sessions_for(user=user, include_archived=include_archived)
    if q and q.strip():
        sessions = sessions.filter(title__icontains=q.strip())
    return with_status(sessions)


def session_detail(*, user, session_id: str) -> ChatSession | None:
    """One session the caller may see (archived too), with its status; None if none."""
    sessions = with_status(sessions_for(user=user, include_archived=True))
    return sessions.filter(pk=session_id).first()


def recent_messages(*, session_id: str, limit: int = MESSAGES_LIMIT_DEFAULT) -> list:
    """The newest `limit` messages, in ascending order (chat_message_seq_unique serves it)."""
    newest = ChatMessage.objects.filter(session_id=session_id).order_by("-seq")[:limit]
    return list(reversed(newest))


def active_stream(*, session_id: str) -> dict | None:
    """The running (or queued) turn a client attaches to, with the chat stream's last seq."""
    turn = (
        ChatTurn.objects.filter(session_id=session_id, status__in=LIVE_TURN_STATUSES)
        .order_by("-started_at")
        .values("id", "status")
        .first()
    )
    if turn is None:
        return None
    return {
        "turn_id": turn["id"],
        "status": turn["status"],
        "last_seq": last_seq(stream=chat_stream(session_id)),
    }
