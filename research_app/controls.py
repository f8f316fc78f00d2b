"""Pause, resume, steer and stop a research loop from its page: the same services as the
agents tree and `POST /api/research/{id}/...`, then back to the loop with what was done."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from agents_app import services
from agents_app.models import Agent
from agentsys.research.budget import CAPS
from agentsys.types import CommandKind, SteerUrgency
from research_app import approvals, questions
from research_app.models import ResearchLoop
from research_app.progress import loop_progress

COMMANDS = {"pause": CommandKind.PAUSE, "resume": CommandKind.RESUME, "stop": CommandKind.STOP}
DONE = {
    "pause": "Pause sent: the loop and its experiments pause now, and wait for Resume.",
    "resume": "Resume sent: the loop goes on where it paused.",
    "stop": "Stop sent: the loop, its experiments and its model session end.",
}
ANSWERED = "Answer sent: the loop reads it in its next prompt and goes on."
STEERED = {
    SteerUrgency.MESSAGE: "Message left in the loop's inbox: it reads it at its next iteration.",
    SteerUrgency.PRIORITY: "Steer sent: the loop acts on it at its next iteration.",
    SteerUrgency.CRITICAL: "Critical steer sent: the loop stops and restarts with it.",
}


@require_POST
def loop_command(request: HttpRequest, agent_id: str, action: str) -> HttpResponse:
    if action not in COMMANDS and action not in ("steer", "answer", "approve"):
        raise Http404("No such action")
    if not ResearchLoop.objects.filter(agent_id=agent_id).exists():
        raise Http404("No such research loop")
    if action == "answer":
        return _answer(request, agent_id)
    if action == "approve":
        return _approve(request, agent_id)
    try:
        if action == "steer":
            _steer(request, agent_id)
        else:
            services.request_agent_command(
                agent_id=agent_id, kind=COMMANDS[action], user=request.user
            )
            messages.success(request, DONE[action])
    except Agent.DoesNotExist:
        raise Http404("No such research loop") from None
    except services.AgentCommandRefused as refused:
        messages.error(request, f"Not done: {refused}")
    return redirect("research-loop", agent_id=agent_id)


def _steer(request: HttpRequest, agent_id: str) -> None:
    urgency = request.POST.get("urgency", SteerUrgency.PRIORITY)
    context = request.POST.get("context", "").strip()
    if urgency not in {tier.value for tier in SteerUrgency}:
        raise services.AgentCommandRefused("choose how urgent the steer is")
    if not context:
        raise services.AgentCommandRefused("a steer needs some words for the loop")
    if len(context) > services.MAX_STEER_CONTEXT:
        raise services.AgentCommandRefused(
            f"the steer is {len(context):,} characters; at most {services.MAX_STEER_CONTEXT:,}"
        )
    services.steer_agent(agent_id=agent_id, context=context, urgency=urgency, user=request.user)
    messages.success(request, STEERED[SteerUrgency(urgency)])


def _approve(request: HttpRequest, agent_id: str) -> HttpResponse:
    """An approval from the loop page's card or the chat's (htmx): the amounts typed per cap,
    none for a batch."""
    add = {}
    for name in CAPS:
        typed = request.POST.get(name, "").strip()
        if typed:
            try:
                add[name] = float(typed)
            except ValueError:
                add = None
                refused = f"Not approved: {name} must be a number, not {typed!r}"
                break
    if add is not None:
        try:
            approvals.approve(agent_id=agent_id, add=add, user=request.user)
            refused = ""
        except approvals.ApprovalRefused as error:
            refused = f"Not approved: {error}"
    if refused:
        messages.error(request, refused)
    else:
        messages.success(request, "Approved: the loop goes on.")
    return _back(request, agent_id, refused)


def _back(request: HttpRequest, agent_id: str, refused: str) -> HttpResponse:
    """To the loop's page; from the chat's card (htmx), its progress line, saying it."""
    if request.headers.get("HX-Request"):
        list(messages.get_messages(request))  # said in the card itself, not on the next page
        found = loop_progress(agent_id)
        return render(request, "research_app/_progress.html", {"p": found, "refused": refused})
    return redirect("research-loop", agent_id=agent_id)


def _answer(request: HttpRequest, agent_id: str) -> HttpResponse:
    """The answer to the loop's question, from its page or from the chat's card of the loop
    (htmx: the card's progress line comes back, saying the answer was sent)."""
    try:
        questions.answer_question(
            agent_id=agent_id, answer=request.POST.get("answer", ""), user=request.user
        )
        refused = ""
        messages.success(request, ANSWERED)
    except questions.AnswerRefused as error:
        refused = f"Not sent: {error}"
        messages.error(request, refused)
    return _back(request, agent_id, refused)
