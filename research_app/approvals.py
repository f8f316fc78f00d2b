"""A research loop at a budget cap (agentsys.research.budget): what it waits for, and the
person's approval, from its page or `POST /api/research/{id}/approve`.

- An approval is open while the loop is live and its saved state holds one: at a budget cap
  (agentsys.research.budget), or before a batch of experiments its autonomy level has it ask
  about (kind "batch", agentsys.research.batch_approval).
- Approving at a cap adds amounts to the caps (`{"gpu_hours": 1}`); what was spent is never
  reset. Approving a batch needs no amounts (any given raise the caps too).
  The approval goes to the loop's inbox as a message whose data holds `approve` (durable: a
  runagentd down or restarting delivers it when it is back); the waiting loop reads it within
  a second, raises its caps and goes on. Its budget alert is resolved.
"""

from __future__ import annotations

import math

from django.db import transaction

from agents_app.models import Agent
from agentsys.research.batch_approval import SIGNATURE as BATCH_SIGNATURE
from agentsys.research.budget import APPROVAL_SIGNATURE, CAPS
from agentsys.types import LIVE_AGENT_STATUSES, EntryType
from memory_app.models import MemoryEntry
from memory_app.services import write_entry
from research_app.models import ResearchLoop
from scheduler_app.models import Alert, AlertStatus
from scheduler_app.services import respond_to_alert


class ApprovalRefused(ValueError):
    pass


class NotWaiting(ApprovalRefused):
    """The loop waits for no approval (409, not 422: the request itself was fine)."""


def open_approval(loop: ResearchLoop) -> dict:
    """{reason, cap, spent} the live loop waits on, or {}."""
    approval = loop.state.get("approval") if isinstance(loop.state, dict) else None
    if not isinstance(approval, dict) or not approval.get("reason"):
        return {}
    if loop.agent.status not in LIVE_AGENT_STATUSES:
        return {}
    keys = ("kind", "reason", "cap", "spent", "batch", "expected_gpu_hours")
    return {k: approval.get(k) for k in keys if approval.get(k) is not None}


def approval_sent(loop: ResearchLoop) -> bool:
    """An approval waits in the loop's inbox, not read yet (the loop reads it within a
    second)."""
    return MemoryEntry.objects.filter(
        target_id=loop.agent_id, type="message", tags__contains=["approval"], acked_at__isnull=True
    ).exists()


def caps_of(loop: ResearchLoop) -> dict:
    budget = loop.state.get("budget") if isinstance(loop.state, dict) else None
    if not isinstance(budget, dict):
        budget = loop.settings.get("budget") if isinstance(loop.settings, dict) else None
    return {k: v for k, v in (budget or {}).items() if k in CAPS}


def checked_amounts(add) -> dict[str, float]:
    if not isinstance(add, dict) or not add:
        raise ApprovalRefused(f"add: name what to add to which cap, e.g. {{{CAPS[2]!r}: 1}}")
    amounts = {}
    for name, value in add.items():
        if name not in CAPS:
            raise ApprovalRefused(f"add: {name!r} is no cap; the caps are {', '.join(CAPS)}")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ApprovalRefused(f"add: {name} must be a number")
        if not math.isfinite(value) or value <= 0:
            raise ApprovalRefused(f"add: {name} must be more than 0")
        amounts[name] = float(value)
    return amounts


def approve(*, agent_id: str, add, user=None):
    """Raise the caps of the loop waiting at one, or let its batch start; ApprovalRefused says
    why not."""
    with transaction.atomic():
        loop = ResearchLoop.objects.select_related("agent").filter(agent_id=agent_id).first()
        if loop is None:
            raise ResearchLoop.DoesNotExist(agent_id)
        Agent.objects.select_for_update().filter(pk=agent_id).first()
        if not open_approval(loop):
            raise NotWaiting(f"{agent_id} is not waiting for an approval ({loop.agent.status})")
        question = loop.state.get("approval") or {}
        batch = question.get("kind") == "batch"
        amounts = checked_amounts(add) if add or not batch else {}
        entry = write_entry(
            type=EntryType.MESSAGE,
            agent_id=f"user:{user.get_username()}" if user else "user",
            target_id=agent_id,
            project=loop.agent.project,
            session=loop.agent.session,
            sweep=loop.agent.sweep,
            role="user",
            tags=["approval"],
            data={
                "context": f"The researcher approved: {amounts or 'its batch'}",
                "approve": amounts,
                # the question it answers: a second approval of the same question must not
                # approve the loop's next one unseen (budget.answers_open_question)
                "answers": question.get("asked_at"),
            },
        )
    resolve_alerts(agent_id, user=user)
    return entry


def resolve_alerts(agent_id: str, *, user=None) -> None:
    pending = Alert.objects.filter(
        agent_id=agent_id,
        status=AlertStatus.PENDING,
        signature__in=(APPROVAL_SIGNATURE, BATCH_SIGNATURE),
    )
    for alert_id in pending.values_list("id", flat=True):
        respond_to_alert(alert_id=alert_id, response="acknowledge", user=user)
