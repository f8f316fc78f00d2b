"""The Django side of agentsys.chat.store.ChatStore: what runagentd's chat step and its L1
agents read and write, each method one unit of work on the daemon's database thread. A
database outage surfaces as StoreUnavailable, as in DjangoRuntimeStore, so the daemon waits
it out like any other store call. runagentd hands it to the Daemon next to the runtime store;
it shares their thread's connection, which the runtime store's close closes."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q
from django.db.models.fields.json import KeyTextTransform
from django.utils import timezone

from agents_app.models import Agent
from agents_app.services import AgentCommandRefused, create_agent, request_agent_command
from agentsys.chat.prompt import variables_for
from agentsys.chat.store import BegunTurn, TurnContext, TurnOutcome
from agentsys.chat.titles import provisional_title
from agentsys.registry import SESSION_AGENT
from agentsys.types import LIVE_AGENT_STATUSES, LIVE_TURN_STATUSES, AgentRole, TurnStatus
from events_app.events import chat_stream, record_event
from events_app.models import Event
from events_app.selectors import last_seq
from ledger_app.services import record_llm_steps
from research_app.services import start_research
from runtime_app.agent_records import agent_record
from runtime_app.chat_context import child_report, prompt_facts
from runtime_app.chat_titles import DEFAULT_TITLE, ChatTitles, title_unwritten
from runtime_app.store_outage import raising_store_unavailable
from sessions_app.models import ChatMessage, ChatSession, ChatTurn, MessageRole
from sessions_app.notices import notices_for
from sessions_app.turns import next_message_seq


def _emit(session_id: str, kind: str, payload: dict) -> dict:
    event = record_event(
        stream=chat_stream(session_id), kind=kind, payload=payload, publish_live=False
    )
    return event.as_message()


def _parts_from_stream(turn: ChatTurn) -> list[dict]:
    """A turn's answer as far as it streamed, rebuilt from its stored events (the truth: a
    daemon killed mid-reply wrote every delta it relayed, and nothing else)."""
    parts: dict[str, dict] = {}
    events = Event.objects.filter(
        stream=chat_stream(turn.session_id),
        seq__gt=turn.after_seq,
        kind__in=["part_delta", "part_update"],
        payload__turn_id=turn.id,
    ).order_by("seq")
    for event in events.iterator():
        payload = event.payload
        part_id = str(payload.get("id", ""))
        if event.kind == "part_delta":
            part = parts.setdefault(
                part_id, {"id": part_id, "type": payload.get("ptype", "text"), "text": ""}
            )
            part["text"] += str(payload.get("delta", ""))
        else:
            parts[part_id] = {
                "type": "tool",
                **{k: v for k, v in payload.items() if k != "turn_id"},
            }
    return list(parts.values())


@raising_store_unavailable
class DjangoChatStore(ChatTitles):
    # -- turns: claim, stop, interrupt ------------------------------------------------------

    def claim_turns(self, *, host_id: int, limit: int = 20) -> list[tuple[str, str]]:
        """(turn id, session id) of the turns this daemon streams from now on: running ones
        nobody claimed, and the oldest queued turn of each session with none running."""
        with transaction.atomic():
            for turn in (
                ChatTurn.objects.select_for_update(skip_locked=True)
                .filter(status=TurnStatus.QUEUED)
                .exclude(session__turns__status=TurnStatus.RUNNING)
                .order_by("started_at")[:limit]
            ):
                if not ChatTurn.objects.filter(
                    session_id=turn.session_id, status=TurnStatus.RUNNING
                ).exists():
                    turn.status, turn.host_id = TurnStatus.RUNNING, host_id
                    turn.after_seq = last_seq(stream=chat_stream(turn.session_id))
                    turn.save(update_fields=["status", "host", "after_seq", "updated_at"])
            claimed = list(
                ChatTurn.objects.select_for_update(skip_locked=True)
                .filter(status=TurnStatus.RUNNING, host__isnull=True)
                .order_by("started_at")[:limit]
            )
            for turn in claimed:
                turn.host_id = host_id
                turn.save(update_fields=["host", "updated_at"])
        mine = ChatTurn.objects.filter(status=TurnStatus.RUNNING, host_id=host_id)
        return list(mine.values_list("id", "session_id"))

    def stop_requests(self, *, host_id: int) -> list[tuple[str, str]]:
        return list(
            ChatTurn.objects.filter(
                status=TurnStatus.RUNNING, host_id=host_id, stop_requested=True
            ).values_list("id", "session_id")
        )

    def interrupt_lost_turns(self, *, host_id: int) -> list[dict]:
        """A new runagentd: the turns its predecessor was streaming ended with it. What had
        come of each reply is kept as the message; the turn says it was interrupted."""
        events = []
        for turn in ChatTurn.objects.filter(status=TurnStatus.RUNNING, host_id=host_id):
            parts = _parts_from_stream(turn)
            with transaction.atomic():
                events += self._close_turn(
                    turn,
                    status=TurnStatus.INTERRUPTED,
                    text="".join(p["text"] for p in parts if p["type"] == "text"),
                    thinking="".join(p["text"] for p in parts if p["type"] == "reasoning"),
                    parts=parts,
                    error="runagentd stopped while this reply streamed; the part that came is kept",
                    actions=[],
                    title="",
                )
        return events

    # -- the session's L1 agent -------------------------------------------------------------

    def session_agent(self, *, session_id: str, host_id: int) -> dict:
        """The live L1 agent row of a session (created if there is none)."""
        with transaction.atomic():
            session = ChatSession.objects.select_for_update().get(pk=session_id)
            agent = (
                Agent.objects.filter(
                    chat_session=session,
                    role=AgentRole.ORCHESTRATOR,
                    status__in=LIVE_AGENT_STATUSES,
                )
                .order_by("-created_at")
                .first()
            )
            event = None
            if agent is None:
                agent = create_agent(
                    role=AgentRole.ORCHESTRATOR,
                    cls_path=SESSION_AGENT,
                    goal=f"Chat session: {session.title}"[:500],
                    config={"chat_session_id": session.pk},
                    project=session.project or "default",
                    session=session.pk,
                    chat_session_id=session.pk,
                    host_id=host_id,
                )
                event = record_event(
                    stream="agents",
                    kind="created",
                    agent_id=agent.id,
                    payload={"role": agent.role, "goal": agent.goal, "parent_id": None},
                    publish_live=False,
                ).as_message()
            elif agent.host_id != host_id:
                agent.host_id = host_id
                agent.save(update_fields=["host", "updated_at"])
        return {"record": agent_record(agent), "event": event}

    def live_children(self, *, agent_id: str) -> list[str]:
        """Children whose end the L1 agent has still to report: the live ones, and those
        that ended while no runagentd watched (no synthetic turn names them yet)."""
        reported = (
            ChatTurn.objects.filter(synthetic=True)
            .annotate(child=KeyTextTransform("child_id", "variables"))
            .filter(child__isnull=False)  # a NULL in NOT IN would hide every child
            .values_list("child", flat=True)
        )
        children = Agent.objects.filter(parent_id=agent_id)
        return list(
            children.filter(Q(status__in=LIVE_AGENT_STATUSES) | ~Q(id__in=reported)).values_list(
                "id", flat=True
            )
        )

    # -- one turn ---------------------------------------------------------------------------

    def begin_turn(self, *, turn_id: str, agent_id: str) -> BegunTurn | None:
        turn = ChatTurn.objects.select_related("session").filter(pk=turn_id).first()
        if turn is None or turn.status != TurnStatus.RUNNING:
            return None
        session = turn.session
        events = []
        if turn.stop_requested:  # stopped before it began: it ends here, unasked
            with transaction.atomic():
                events = self._close_turn(
                    turn,
                    status=TurnStatus.STOPPED,
                    text="",
                    thinking="",
                    parts=[],
                    error="",
                    actions=[],
                    title="",
                )
            return BegunTurn(context=None, events=events)
        with transaction.atomic():
            if turn.synthetic and not turn.user_message_id:
                turn.user_message = ChatMessage.objects.create(
                    session=session,
                    seq=next_message_seq(session.pk),
                    role=MessageRole.SYSTEM,
                    content=turn.message,
                    turn=turn,
                )
                turn.save(update_fields=["user_message", "updated_at"])
                events.append(
                    _emit(
                        session.pk,
                        "system_message",
                        {
                            "turn_id": turn.id,
                            "seq": turn.user_message.seq,
                            "content": turn.message,
                            # The line the page shows a person instead of the agent's report.
                            "notice": notices_for([turn]).get(turn.id),
                        },
                    )
                )
        context = TurnContext(
            turn_id=turn.id,
            session_id=session.pk,
            mode=turn.mode,
            message=turn.message,
            synthetic=turn.synthetic,
            workdir=session.workdir,
            model_provider=session.model_provider,
            model_id=session.model_id,
            opencode_session_id=session.opencode_session_id,
            after_interrupt=ChatTurn.objects.filter(session=session)
            .exclude(pk=turn.pk)
            .exclude(finished_at=None)
            .order_by("-finished_at")
            .values_list("status", flat=True)
            .first()
            == TurnStatus.INTERRUPTED,
            title_unwritten=title_unwritten(session),
            variables=variables_for(
                prompt_facts(session, turn, agent_id),
                workdir=session.workdir,
                mode=turn.mode,
                system_prompt=session.system_prompt,
            ),
        )
        return BegunTurn(context=context, events=events)

    def save_prompt(self, *, turn_id: str, prompt: str, skill_id: str, variables: dict):
        turn = ChatTurn.objects.get(pk=turn_id)
        turn.prompt, turn.skill_id = prompt, skill_id
        turn.variables = {**turn.variables, **variables}  # keeps child_id of a synthetic turn
        turn.save(update_fields=["prompt", "skill_id", "variables", "updated_at"])

    def set_opencode_session(self, *, session_id: str, opencode_session_id: str) -> None:
        ChatSession.objects.filter(pk=session_id).update(
            opencode_session_id=opencode_session_id[:100]
        )

    @transaction.atomic
    def emit(self, *, session_id: str, events: list[tuple[str, dict]]) -> list[dict]:
        # A reply's deltas commit without waiting for their fsync: a crash of PostgreSQL
        # itself could lose the last fraction of a second of a stream (its turn then ends
        # interrupted, as for a crash of runagentd); everything else, including the final
        # message, commits as usual. Per delta this is ~1 ms instead of a disk flush.
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit TO OFF")
        return [_emit(session_id, kind, payload) for kind, payload in events]

    @transaction.atomic
    def finish_turn(self, *, turn_id: str, outcome: TurnOutcome) -> list[dict]:
        turn = ChatTurn.objects.select_for_update().select_related("session").get(pk=turn_id)
        # Its paid steps go in with its close, both or neither; and even when a newer daemon
        # closed it already, they were paid for.
        record_llm_steps(
            steps=outcome.steps,
            chat_session_id=turn.session_id,
            user_id=turn.session.owner_id,
            chat_turn_id=turn.pk,
        )
        if turn.status not in LIVE_TURN_STATUSES:
            return []  # already closed (interrupted by a newer daemon, stopped while queued)
        if turn.stop_requested and outcome.status == TurnStatus.INTERRUPTED:
            # Its agent was stopped (the session deleted) after a person asked to stop it.
            outcome = dataclasses.replace(outcome, status=TurnStatus.STOPPED, error="")
        return self._close_turn(turn, **dataclasses.asdict(outcome))

    def record_session_steps(self, *, session_id: str, steps: list[dict]) -> None:
        owner = ChatSession.objects.filter(pk=session_id).values_list("owner_id", flat=True)
        record_llm_steps(steps=steps, chat_session_id=session_id, user_id=owner.first())

    def _close_turn(self, turn, *, status, text, thinking, parts, error, actions, title, steps=()):
        session = turn.session
        now = timezone.now()
        if text or thinking or parts:
            ChatMessage.objects.create(
                session=session,
                seq=next_message_seq(session.pk),
                role=MessageRole.ASSISTANT,
                content=text,
                thinking=thinking,
                parts=parts,
                turn=turn,
            )
        turn.status, turn.error, turn.finished_at = status, error, now
        turn.full_text, turn.full_thinking, turn.parts, turn.actions = (
            text,
            thinking,
            parts,
            actions,
        )
        turn.save()
        updates = {"updated_at": now}
        if not session.title or session.title == DEFAULT_TITLE:
            # The first message stands in until a model writes the title (chat_titles).
            first = title.strip() if title else ""
            if not first or first.lower().startswith("new session"):
                first = provisional_title(turn.message if not turn.synthetic else "")
            if first:
                updates["title"] = first[:200]
        ChatSession.objects.filter(pk=session.pk).update(**updates)
        events = []
        if error and status != TurnStatus.FAILED:  # a failure already said why, live
            events.append(_emit(session.pk, "error", {"turn_id": turn.id, "message": error}))
        events.append(
            _emit(
                session.pk,
                "session_status",
                {
                    "turn_id": turn.id,
                    "status": "idle",
                    "outcome": status,
                    "title": updates.get("title", session.title),
                },
            )
        )
        return events

    # -- children ---------------------------------------------------------------------------

    def start_research(
        self,
        *,
        agent_id: str,
        session_id: str,
        goal: str,
        max_iterations: int | None,
        workdir: str = "",
    ) -> str:
        """`workdir`: the project the person named (relative: to the chat's), else the
        chat's own."""
        session = ChatSession.objects.get(pk=session_id)
        if workdir:
            base = Path(session.workdir or settings.AGENTSYS_WORKDIR)
            workdir = str(base / Path(workdir).expanduser())  # an absolute one stays itself
        loop = start_research(
            goal=goal,
            max_iterations=max_iterations or 10,
            wait_seconds=0,
            workdir=workdir or session.workdir or None,
            chat_session_id=session_id,
            parent_id=agent_id,
        )
        return loop.agent_id

    def command_child(self, *, session_id: str, target: str, kind: str, context: str) -> str:
        """'' once the command is queued for the child's daemon, else why not."""
        agent = Agent.objects.filter(pk=target).first()
        if (
            agent is None
            or agent.chat_session_id != session_id
            or agent.role == AgentRole.ORCHESTRATOR
        ):
            return f"no experiment {target!r} in this chat session"
        payload = {"context": context, "urgency": "priority"} if kind == "steer" else {}
        try:
            request_agent_command(agent_id=agent.id, kind=kind, payload=payload)
        except AgentCommandRefused as error:
            return str(error)
        return ""

    def child_report(self, *, agent_id: str) -> dict:
        return child_report(agent_id)

    def enqueue_synthetic(self, *, session_id: str, message: str, child_id: str) -> str:
        """A queued synthetic turn reporting a child's end (once per child); runagentd starts
        it when the session has no running turn."""
        with transaction.atomic():
            session = ChatSession.objects.select_for_update().get(pk=session_id)
            if ChatTurn.objects.filter(
                session=session, synthetic=True, variables__child_id=child_id
            ).exists():
                return ""
            turn = ChatTurn.objects.create(
                session=session,
                status=TurnStatus.QUEUED,
                mode=session.mode,
                synthetic=True,
                message=message,
                variables={"child_id": child_id},
            )
        return turn.id
