"""REST for chat sessions: create, list (with each session's status), read with its
messages and live stream, rename, archive (DELETE), and its model, system prompt and the
default budget of the loops it starts. (Sending messages and streaming are the chat
pipeline's routes.)"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from ninja import Field, Query, Router, Schema, Status
from pydantic import ConfigDict, StringConstraints

from common.budget_schema import BudgetCaps
from common.read_snapshot import read_snapshot
from sessions_app import selectors, services
from sessions_app.models import ChatMode

router = Router()

ID_LENGTH = 40
Provider = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=100)]
ModelId = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]
Title = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]
SystemPrompt = Annotated[str, StringConstraints(max_length=100_000)]


class SessionIn(Schema):
    model_config = ConfigDict(extra="forbid")  # a misspelt field is an error, not ignored

    title: str = Field("", max_length=200)
    mode: ChatMode = ChatMode.AUTO
    system_prompt: SystemPrompt = ""
    model_provider: Provider | None = None
    model_id: ModelId | None = None


class SessionOut(Schema):
    id: str
    title: str
    mode: str
    model_provider: str
    model_id: str
    workdir: str
    project: str
    archived: bool
    created_at: datetime
    updated_at: datetime


class SessionListOut(SessionOut):
    status: str = Field(
        description="awaiting_human, running, failed, questionable, done or idle "
        "(the rule: sessions_app.selectors.with_status)"
    )


class MessageOut(Schema):
    seq: int
    role: str
    content: str
    thinking: str
    parts: list
    turn_id: str | None
    created_at: datetime


class ActiveStreamOut(Schema):
    turn_id: str
    status: str
    last_seq: int


class SessionDetailOut(SessionListOut):
    system_prompt: str
    messages: list[MessageOut]
    active_stream: ActiveStreamOut | None


class TitleIn(Schema):
    model_config = ConfigDict(extra="forbid")

    title: Title


class ModelIO(Schema):
    model_config = ConfigDict(extra="forbid")

    model_provider: Provider
    model_id: ModelId


class SystemPromptIO(Schema):
    model_config = ConfigDict(extra="forbid")

    system_prompt: SystemPrompt


class BudgetIO(BudgetCaps):
    """A chat's default budget: every cap null, none (each loop's own and its person's apply)."""


class ErrorOut(Schema):
    detail: str


def _no_session(session_id: str) -> Status:
    return Status(404, {"detail": f"No chat session {session_id!r}"})


@router.get("", response=list[SessionListOut], summary="Chat sessions, most recently active first")
def list_sessions(
    request,
    include_archived: bool = False,
    limit: int = Query(50, ge=1, le=500),
    q: str | None = Query(None, max_length=200, description="Words in the title"),
):
    sessions = selectors.session_list(
        user=selectors.caller_of(request), include_archived=include_archived, q=q
    )
    return list(sessions[:limit])


@router.post("", response={201: SessionListOut}, summary="Create a chat session")
def create_session(request, payload: SessionIn):
    session = services.create_session(
        owner=selectors.caller_of(request),
        title=payload.title,
        mode=payload.mode,
        system_prompt=payload.system_prompt,
        model_provider=payload.model_provider or "",
        model_id=payload.model_id or "",
    )
    session.status = "idle"
    return Status(201, session)


@router.get(
    "/{session_id}",
    response={200: SessionDetailOut, 404: ErrorOut},
    summary="One chat session with its newest messages and its live stream",
)
def get_session(
    request,
    session_id: str,
    messages_limit: int = Query(
        selectors.MESSAGES_LIMIT_DEFAULT, ge=1, le=selectors.MESSAGES_LIMIT_MAX
    ),
):
    session = selectors.session_detail(user=selectors.caller_of(request), session_id=session_id)
    if session is None:
        return _no_session(session_id)
    with read_snapshot():  # a reply is in the messages or still in the live stream, not lost
        messages = selectors.recent_messages(session_id=session.pk, limit=messages_limit)
        active = selectors.active_stream(session_id=session.pk)
    return {
        **{name: getattr(session, name) for name in SessionListOut.model_fields},
        "system_prompt": session.system_prompt,
        "messages": messages,
        "active_stream": active,
    }


@router.patch(
    "/{session_id}", response={200: SessionListOut, 404: ErrorOut}, summary="Rename a session"
)
def rename_session(request, session_id: str, payload: TitleIn):
    session = selectors.visible_session(request, session_id)
    if session is None:
        return _no_session(session_id)
    services.rename_session(session=session, title=payload.title)
    return selectors.session_detail(user=selectors.caller_of(request), session_id=session.pk)


@router.delete(
    "/{session_id}",
    response={204: None, 404: ErrorOut},
    summary="Archive a session and stop its agents and its live turn",
)
def delete_session(request, session_id: str):
    session = selectors.visible_session(request, session_id)
    if session is None:
        return _no_session(session_id)
    services.delete_session(session=session, user=selectors.caller_of(request))
    return Status(204, None)


@router.get("/{session_id}/model", response={200: ModelIO, 404: ErrorOut}, summary="Its model")
def get_model(request, session_id: str):
    session = selectors.visible_session(request, session_id)
    return _no_session(session_id) if session is None else session


@router.put(
    "/{session_id}/model",
    response={200: ModelIO, 404: ErrorOut},
    summary="Choose the model of its next turns",
)
def put_model(request, session_id: str, payload: ModelIO):
    session = selectors.visible_session(request, session_id)
    if session is None:
        return _no_session(session_id)
    return services.set_model(
        session=session, model_provider=payload.model_provider, model_id=payload.model_id
    )


@router.get(
    "/{session_id}/system-prompt",
    response={200: SystemPromptIO, 404: ErrorOut},
    summary="Its system prompt",
)
def get_system_prompt(request, session_id: str):
    session = selectors.visible_session(request, session_id)
    return _no_session(session_id) if session is None else session


@router.put(
    "/{session_id}/system-prompt",
    response={200: SystemPromptIO, 404: ErrorOut},
    summary="Set its system prompt (empty: none)",
)
def put_system_prompt(request, session_id: str, payload: SystemPromptIO):
    session = selectors.visible_session(request, session_id)
    if session is None:
        return _no_session(session_id)
    return services.set_system_prompt(session=session, system_prompt=payload.system_prompt)


@router.get(
    "/{session_id}/budget",
    response={200: BudgetIO, 404: ErrorOut},
    summary="The default budget of the research loops it starts",
)
def get_budget(request, session_id: str):
    session = selectors.visible_session(request, session_id)
    return _no_session(session_id) if session is None else session.default_budget


@router.put(
    "/{session_id}/budget",
    response={200: BudgetIO, 404: ErrorOut, 422: ErrorOut},
    summary="Set the default budget of the loops it starts (the tightest with theirs applies)",
)
def put_budget(request, session_id: str, payload: BudgetIO):
    session = selectors.visible_session(request, session_id)
    if session is None:
        return _no_session(session_id)
    try:
        services.set_default_budget(session=session, budget=payload.dict(exclude_none=True))
    except services.BudgetRefused as refused:
        return Status(422, {"detail": str(refused)})
    return session.default_budget
