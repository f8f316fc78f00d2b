"""Chat pages: the session list (status badges, search, new chat) and one chat, whose
reply streams in place over the session's WebSocket (static/js/chat.js). Sending and stopping
are small JSON POSTs from that script (CSRF-checked), so a reply is never a page reload."""

from __future__ import annotations

import json

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from agentsys.chat.actions import reply_notes
from common.budget_form import BudgetForm, budget_words
from common.read_snapshot import read_snapshot
from events_app.events import chat_stream
from events_app.selectors import last_seq
from ledger_app import selectors as ledger
from sessions_app import action_cards, selectors, services, turns
from sessions_app.models import ChatMode, ChatTurn
from sessions_app.notices import notices_for

PAGE_MESSAGES = 1000
MODE_HELP = {
    ChatMode.WILD: "Every message starts a research loop; the agent reports back when it ends.",
    ChatMode.AUTO: "The session agent answers, or starts research or a run when it is needed.",
    ChatMode.AGENT: "It answers and uses its tools directly; it never starts agents.",
}


def _visible_session(request: HttpRequest, session_id: str):
    session = selectors.session_detail(user=request.user, session_id=session_id)
    if session is None:
        raise Http404("No such chat")
    return session


def chat_list(request: HttpRequest) -> HttpResponse:
    q = request.GET.get("q", "").strip()[:200]
    sessions = selectors.session_list(user=request.user, q=q)[:200]
    context = {"nav": "chat", "sessions": sessions, "q": q}
    if request.headers.get("HX-Request"):
        return render(request, "sessions_app/_session_rows.html", context)
    return render(request, "sessions_app/chats.html", context)


@require_POST
def new_chat(request: HttpRequest) -> HttpResponse:
    mode = request.POST.get("mode", ChatMode.AUTO)
    session = services.create_session(
        owner=request.user, mode=mode if mode in ChatMode.values else ChatMode.AUTO
    )
    return redirect("chat", session_id=session.pk)


def chat(
    request: HttpRequest,
    session_id: str,
    *,
    budget_form: BudgetForm | None = None,
    status: int = 200,
) -> HttpResponse:
    session = _visible_session(request, session_id)
    with read_snapshot():  # the messages, the live turn and the position at one moment
        messages = selectors.recent_messages(session_id=session.pk, limit=PAGE_MESSAGES)
        active = selectors.active_stream(session_id=session.pk)
        # A reply streaming now is replayed from its start; otherwise only what comes next.
        stream_after = _stream_start(session.pk, active)
    context = {
        "nav": "chat",
        "session": session,
        "messages": _with_spent(session.pk, _with_actions(messages)),
        "spent": ledger.spent_by_session(session.pk),
        "modes": [(value, label, MODE_HELP[value]) for value, label in ChatMode.choices],
        "active": active,
        "stream_after": stream_after,
        "action_words": action_cards.ACTION_WORDS,
        "budget_form": budget_form or BudgetForm(budget=session.default_budget),
        "budget_now": budget_words(session.default_budget),
        "model": f"{session.model_provider}/{session.model_id}".strip("/")
        or f"{settings.AGENTSYS.model_provider}/{settings.AGENTSYS.model_id}",
    }
    return render(request, "sessions_app/chat.html", context, status=status)


def _stream_start(session_id: str, active: dict | None) -> int:
    if active is not None:
        turn = ChatTurn.objects.filter(pk=active["turn_id"]).values("after_seq").first()
        if turn is not None:
            return turn["after_seq"]
    return last_seq(stream=chat_stream(session_id))


def _with_spent(session_id: str, messages: list) -> list:
    """The last reply of each turn carries what the turn's model steps cost (`.spent`)."""
    spent = ledger.spent_by_turn(session_id)
    last = {m.turn_id: m for m in messages if m.role == "assistant" and m.turn_id}
    for message in messages:
        message.spent = spent.get(message.turn_id) if last.get(message.turn_id) is message else None
    return messages


def _with_actions(messages: list) -> list:
    """Each reply with the l1_action results of its turn (`.actions`), its text without the
    notes saved under it (its cards show them), and each report of a finished child with the
    line a person reads instead (`.notice`); one query for all."""
    turn_ids = {m.turn_id for m in messages if m.turn_id and m.role != "user"}
    turns = list(
        ChatTurn.objects.filter(pk__in=turn_ids).only("id", "actions", "synthetic", "variables")
    )
    actions = {t.pk: action_cards.cards(t.actions) for t in turns}
    notices = notices_for([t for t in turns if t.synthetic])
    saved_notes = {t.pk: "\n\n".join(reply_notes(t.actions)) for t in turns if t.actions}
    for message in messages:
        message.actions = actions.get(message.turn_id, []) if message.role == "assistant" else []
        if message.actions and saved_notes.get(message.turn_id):
            # The cards say it: the notes saved under the reply are not shown twice.
            message.content = message.content.removesuffix(saved_notes[message.turn_id]).rstrip()
        message.notice = notices.get(message.turn_id) if message.role == "system" else None
    return messages


def _json_body(request: HttpRequest) -> dict:
    try:
        body = json.loads(request.body or b"{}")
    except (ValueError, UnicodeDecodeError):
        return {}
    return body if isinstance(body, dict) else {}


@require_POST
def send(request: HttpRequest, session_id: str) -> JsonResponse:
    session = _visible_session(request, session_id)
    body = _json_body(request)
    try:
        turn = turns.submit_turn(
            session=session, message=body.get("message"), mode=body.get("mode", session.mode)
        )
    except turns.TurnRefused as refused:
        return JsonResponse({"detail": str(refused)}, status=refused.status)
    return JsonResponse({"turn_id": turn.pk}, status=202)


@require_POST
def stop(request: HttpRequest, session_id: str) -> JsonResponse:
    session = _visible_session(request, session_id)
    turn = turns.stop_turn(session=session)
    return JsonResponse({"stopping": turn.pk if turn else None})


@require_POST
def set_model(request: HttpRequest, session_id: str) -> JsonResponse:
    session = _visible_session(request, session_id)
    provider, _, model_id = str(_json_body(request).get("model", "")).partition("/")
    if not provider.strip() or not model_id.strip() or len(model_id) > 200:
        return JsonResponse({"detail": "model: expected provider/model-id"}, status=400)
    services.set_model(session=session, model_provider=provider, model_id=model_id)
    return JsonResponse({"model": f"{provider}/{model_id}"})


@require_POST
def set_budget(request: HttpRequest, session_id: str) -> HttpResponse:
    """The default budget of the loops this chat starts; a bad one re-renders the page with
    the form as typed, saying why."""
    session = _visible_session(request, session_id)
    form = BudgetForm(request.POST)
    if form.is_valid():
        try:
            services.set_default_budget(session=session, budget=form.budget)
        except services.BudgetRefused as refused:
            form.add_error(None, str(refused))
        else:
            return redirect("chat", session_id=session.pk)
    return chat(request, session_id, budget_form=form, status=400)
