"""The chat side of runagentd's store: turns claimed in order, a synthetic turn waiting for
the streaming one, a lost turn closed with its partial reply rebuilt from its events."""

from __future__ import annotations

import pytest

from agents_app.models import Agent
from agentsys.chat.store import TurnOutcome
from events_app.events import chat_stream
from events_app.models import Event
from hosts_app.models import Host
from runtime_app.chat_store import DjangoChatStore
from sessions_app import turns
from sessions_app.models import ChatMessage, ChatTurn
from sessions_app.services import create_session

pytestmark = pytest.mark.django_db


@pytest.fixture
def store():
    return DjangoChatStore()


@pytest.fixture
def host():
    return Host.objects.create(name="h1").pk


def outcome(status="done", text="answer"):
    return TurnOutcome(status=status, text=text)


def test_a_synthetic_turn_waits_for_the_streaming_one(store, host):
    session = create_session()
    user_turn = turns.submit_turn(session=session, message="hi", mode="auto")
    queued = store.enqueue_synthetic(session_id=session.pk, message="report", child_id="c1")
    assert store.claim_turns(host_id=host) == [(user_turn.id, session.pk)]
    assert ChatTurn.objects.get(pk=queued).status == "queued"
    # The same child is reported once, however often its end is heard of.
    assert store.enqueue_synthetic(session_id=session.pk, message="again", child_id="c1") == ""

    store.finish_turn(turn_id=user_turn.id, outcome=outcome())
    claimed = store.claim_turns(host_id=host)
    assert claimed == [(queued, session.pk)]
    synthetic = ChatTurn.objects.get(pk=queued)
    assert (
        synthetic.status == "running"
        and synthetic.after_seq == Event.objects.filter(stream=chat_stream(session.pk)).count()
    )
    # A new message now waits its turn behind the report (409), never cuts into it.
    with pytest.raises(turns.TurnRefused) as refused:
        turns.submit_turn(session=session, message="more", mode="auto")
    assert refused.value.status == 409
    begun = store.begin_turn(turn_id=queued, agent_id="orchestrator-x")
    assert begun.context.synthetic and begun.context.message == "report"
    system = ChatMessage.objects.get(session=session, role="system")
    assert system.content == "report" and system.seq == 3  # after the user's and the answer


def test_a_lost_turn_keeps_what_streamed(store, host):
    session = create_session()
    turn = turns.submit_turn(session=session, message="hi", mode="auto")
    store.claim_turns(host_id=host)
    store.emit(
        session_id=session.pk,
        events=[
            ("part_delta", {"turn_id": turn.id, "id": "r", "ptype": "reasoning", "delta": "hm"}),
            ("part_delta", {"turn_id": turn.id, "id": "t", "ptype": "text", "delta": "Half "}),
            ("part_update", {"turn_id": turn.id, "id": "k", "tool": "bash", "status": "running"}),
            ("part_delta", {"turn_id": turn.id, "id": "t", "ptype": "text", "delta": "done"}),
        ],
    )
    events = store.interrupt_lost_turns(host_id=host)
    turn.refresh_from_db()
    assert turn.status == "interrupted" and "runagentd stopped" in turn.error
    message = ChatMessage.objects.get(session=session, role="assistant")
    assert (message.content, message.thinking) == ("Half done", "hm")
    assert [p["type"] for p in message.parts] == ["reasoning", "text", "tool"]
    assert [e["kind"] for e in events] == ["error", "session_status"]
    assert events[-1]["payload"]["outcome"] == "interrupted"
    # Another host's turns are not this one's to close.
    assert store.interrupt_lost_turns(host_id=Host.objects.create(name="h2").pk) == []


def test_a_stop_asked_before_the_turn_began_ends_it_unasked(store, host):
    session = create_session()
    turn = turns.submit_turn(session=session, message="hi", mode="auto")
    store.claim_turns(host_id=host)
    turns.stop_turn(session=session)
    assert store.stop_requests(host_id=host) == [(turn.id, session.pk)]
    begun = store.begin_turn(turn_id=turn.id, agent_id="orchestrator-x")
    assert begun.context is None and ChatTurn.objects.get(pk=turn.pk).status == "stopped"


def test_children_to_watch_are_the_live_and_the_unreported(store, host):
    session = create_session()
    l1 = store.session_agent(session_id=session.pk, host_id=host)["record"].id
    assert store.session_agent(session_id=session.pk, host_id=host)["record"].id == l1

    def child(status):
        return Agent.objects.create(
            id=f"research-{status}",
            role="research",
            cls_path="x",
            project="p",
            parent_id=l1,
            chat_session=session,
            status=status,
        ).id

    live, ended, reported = child("running"), child("done"), child("failed")
    store.enqueue_synthetic(session_id=session.pk, message="r", child_id=reported)
    assert sorted(store.live_children(agent_id=l1)) == sorted([live, ended])


def test_only_the_sessions_own_experiments_take_its_commands(store, host):
    session, other = create_session(), create_session()
    theirs = Agent.objects.create(
        id="research-theirs",
        role="research",
        cls_path="x",
        project="p",
        chat_session=other,
        status="running",
    )
    problem = store.command_child(session_id=session.pk, target=theirs.id, kind="stop", context="")
    assert "no experiment" in problem


def test_a_loop_started_from_a_chat_works_on_the_project_the_person_named(
    store, host, tmp_path, settings
):
    """Issue 37 §1: a chat starts a loop on the person's own repository (a path they name),
    relative to the chat's folder or absolute; a folder that is not there is refused, saying
    which."""
    from research_app.models import ResearchLoop
    from research_app.services import ResearchRefused

    settings.AGENTSYS_WORKDIR = tmp_path
    (tmp_path / "sub").mkdir()
    project = tmp_path / "elsewhere" / "project"
    project.mkdir(parents=True)
    session = create_session()
    l1 = store.session_agent(session_id=session.pk, host_id=host)["record"].id

    def start(workdir):
        loop_id = store.start_research(
            agent_id=l1, session_id=session.pk, goal="g", max_iterations=2, workdir=workdir
        )
        return ResearchLoop.objects.get(pk=loop_id).settings["workdir"]

    assert start(str(project)) == str(project)
    assert start("sub") == str(tmp_path / "sub")
    assert start("") == session.workdir
    with pytest.raises(ResearchRefused, match=r"missing.* is not an existing absolute directory"):
        start(str(tmp_path / "missing"))
