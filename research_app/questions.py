"""A research loop's question to the researcher (agentsys.research.attention): what is open, the
answer given on the loop's page, in the chat it came from or through
`POST /api/research/{id}/answer`, and the question's alert.

- A question is open while the loop is live (running or paused) and its saved state holds one.
- An answer goes to the loop's inbox as a message (a MESSAGE steer: durable, so a runagentd
  that is down or restarting delivers it when it comes back); the waiting loop sees it within a
  second and reads it as the next iteration's guidance from the researcher.
- Once answered the question's alerts are resolved, and so are those of a loop that ended
  while it waited, or that had paused itself for replies without tags (`settle_alerts`,
  called with every saved state).
"""

from __future__ import annotations

from agents_app.models import Agent
from agents_app.services import AgentCommandRefused, steer_agent
from agentsys.types import LIVE_AGENT_STATUSES, SteerUrgency
from memory_app.models import MemoryEntry
from research_app.models import ResearchLoop
from scheduler_app.models import Alert, AlertStatus
from scheduler_app.services import respond_to_alert

MAX_ANSWER_CHARS = 10_000
QUESTION_SIGNATURE = "question:"  # + the iteration it was asked in (agentsys attention)
TAGLESS_SIGNATURE = "tagless"  # the alert of a loop paused for replies without tags


class AnswerRefused(ValueError):
    pass


def open_question(loop: ResearchLoop) -> str:
    """The question the live loop waits on, or ""."""
    question = loop.state.get("question") if isinstance(loop.state, dict) else None
    if not isinstance(question, dict) or loop.agent.status not in LIVE_AGENT_STATUSES:
        return ""
    text = question.get("text")
    return text if isinstance(text, str) else ""


def answer_sent(loop: ResearchLoop) -> bool:
    """An answer (a message to the loop) waits in its inbox, not read yet."""
    return MemoryEntry.objects.filter(
        target_id=loop.agent_id, type="message", acked_at__isnull=True
    ).exists()


def answer_question(*, agent_id: str, answer: str, user=None) -> MemoryEntry:
    """The person's answer, into the loop's next prompt; AnswerRefused says why not."""
    loop = ResearchLoop.objects.select_related("agent").filter(agent_id=agent_id).first()
    if loop is None:
        raise ResearchLoop.DoesNotExist(agent_id)
    answer = (answer or "").strip()
    question = open_question(loop)
    if not question:
        raise AnswerRefused(f"{agent_id} is not waiting for an answer ({loop.agent.status})")
    if not answer:
        raise AnswerRefused("an answer needs some words")
    if len(answer) > MAX_ANSWER_CHARS:
        raise AnswerRefused(
            f"the answer is {len(answer):,} characters; at most {MAX_ANSWER_CHARS:,}"
        )
    context = f"Your question was: {question}\nThe researcher's answer: {answer}"
    try:
        entry = steer_agent(
            agent_id=agent_id, context=context, urgency=SteerUrgency.MESSAGE, user=user
        )
    except (AgentCommandRefused, Agent.DoesNotExist) as refused:
        raise AnswerRefused(str(refused)) from None
    resolve_alerts(agent_id, user=user)
    return entry


def resolve_alerts(agent_id: str, *, user=None, through: int | None = None) -> None:
    """Resolve the loop's open question alerts (`question:<iteration>`): all of them, or
    those asked in iterations up to `through`."""
    asked = Alert.objects.filter(
        agent_id=agent_id, status=AlertStatus.PENDING, signature__startswith=QUESTION_SIGNATURE
    )
    for alert_id, signature in asked.values_list("id", "signature"):
        asked_in = signature.removeprefix(QUESTION_SIGNATURE)
        if through is None or (asked_in.isdigit() and int(asked_in) <= through):
            respond_to_alert(alert_id=alert_id, response="acknowledge", user=user)


def settle_alerts(agent_id: str, state: dict) -> None:
    """The question alerts a saved state shows answered: all of a loop that ended; those up
    to its iteration once no question is open. The states reach the database in order but
    may come after the alert (raised straight from the loop's process): one saved before
    the question was asked has an earlier iteration, so it resolves nothing."""
    if state.get("status") != "running":
        resolve_alerts(agent_id)
        paused_for_tags = Alert.objects.filter(
            agent_id=agent_id, status=AlertStatus.PENDING, signature=TAGLESS_SIGNATURE
        )
        for alert_id in paused_for_tags.values_list("id", flat=True):
            respond_to_alert(alert_id=alert_id, response="acknowledge")
    elif not state.get("question") and isinstance(state.get("iteration"), int):
        resolve_alerts(agent_id, through=state["iteration"])
