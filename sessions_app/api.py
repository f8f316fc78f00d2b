"""REST for chat sessions. (Sending messages and streaming come with the chat issue.)"""

from __future__ import annotations

from datetime import datetime

from django.shortcuts import get_object_or_404
from ninja import Field, Query, Router, Schema, Status
from pydantic import ConfigDict

from sessions_app import selectors, services
from sessions_app.models import ChatMode

router = Router()


class SessionIn(Schema):
    model_config = ConfigDict(extra="forbid")  # a misspelt field is an error, not ignored

    title: str = Field("", max_length=200)
    mode: ChatMode = ChatMode.AUTO
    system_prompt: str = Field("", max_length=100_000)


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


def _caller(request):
    # The API token stands for the operator (request.auth == "token"), a session for its user.
    return None if request.auth == "token" else request.user


@router.get("", response=list[SessionOut], summary="Chat sessions, most recently active first")
def list_sessions(request, include_archived: bool = False, limit: int = Query(50, ge=1, le=500)):
    return list(
        selectors.sessions_for(user=_caller(request), include_archived=include_archived)[:limit]
    )


@router.post("", response={201: SessionOut}, summary="Create a chat session")
def create_session(request, payload: SessionIn):
    session = services.create_session(
        owner=_caller(request),
        title=payload.title,
        mode=payload.mode,
        system_prompt=payload.system_prompt,
    )
    return Status(201, session)


@router.get("/{session_id}", response=SessionOut, summary="One chat session")
def get_session(request, session_id: str):
    return get_object_or_404(
        selectors.sessions_for(user=_caller(request), include_archived=True), pk=session_id
    )
