"""`manage.py chat --wait-reports` prints the report of every loop its reply started, however
runagentd's writes fall between the command's reads: it is run here against every schedule
of the daemon's five writes (the reply's action, its end, the report queued, begun and
ended) among the command's queries, the daemon's next writes made just before one of
the command's queries, as a busy machine can order them."""

from __future__ import annotations

import itertools
import time
from io import StringIO

import pytest
from django.core.management.base import CommandError
from django.db import connection

from agentsys.chat.store import TurnOutcome
from hosts_app.models import Host
from runtime_app.chat_store import DjangoChatStore
from sessions_app import turns
from sessions_app.management.commands import chat
from sessions_app.services import create_session

pytestmark = pytest.mark.django_db

CHILD = "research-c0ffee"
REPORT = "The research loop `research-c0ffee` you started has ended: done."


def _outcome(text: str) -> TurnOutcome:
    return TurnOutcome(status="done", text=text)


def _daemon_writes(store, host_id: int, session_id: str, turn_id: str) -> list:
    """runagentd's writes for a reply that starts a loop and the loop's report, in order."""
    synthetic = {}

    def begin_report():
        store.claim_turns(host_id=host_id)
        store.begin_turn(turn_id=synthetic["id"], agent_id="")

    def finish_report():
        store.finish_turn(turn_id=synthetic["id"], outcome=_outcome("It went well."))

    action = {"action": "spawn_research", "goal": "lr", "agent_id": CHILD, "error": ""}
    return [
        lambda: store.emit(session_id=session_id, events=[("l1_action", action)]),
        lambda: store.finish_turn(turn_id=turn_id, outcome=_outcome("On it.")),
        lambda: synthetic.update(
            id=store.enqueue_synthetic(session_id=session_id, message=REPORT, child_id=CHILD)
        ),
        begin_report,
        finish_report,
    ]


def _run_command(host_id: int, schedule: tuple[int, ...]) -> str:
    """The command's output with the daemon's i-th write made before its schedule[i]-th query."""
    session = create_session()
    turn = turns.submit_turn(session=session, message="Which lr?", mode="wild")
    store = DjangoChatStore()
    store.claim_turns(host_id=host_id)
    writes = _daemon_writes(store, host_id, session.pk, turn.id)
    queries = itertools.count()
    daemon_writing = False

    def interleave(execute, sql, params, many, context):
        nonlocal daemon_writing
        if not daemon_writing:
            number = next(queries)
            daemon_writing = True
            try:
                for write, at in zip(writes, schedule, strict=True):
                    if at == number:
                        write()
            finally:
                daemon_writing = False
        return execute(sql, params, many, context)

    out = StringIO()
    command = chat.Command(stdout=out, stderr=StringIO())
    with connection.execute_wrapper(interleave):
        try:
            command._print_until(session, turn.after_seq, time.monotonic() + 5, True)
        except CommandError:
            out.write("\n[timed out]")
    return out.getvalue()


def _schedules():
    """Each write before the same query as the one before it, or the next; the first write
    before one of the command's first three queries (a poll's worth)."""
    for first in range(3):
        for gaps in itertools.product((0, 1), repeat=4):
            yield tuple(itertools.accumulate(gaps, initial=first))


def test_wait_reports_prints_the_report_whenever_the_daemon_writes_it(monkeypatch):
    monkeypatch.setattr(chat, "POLL_SECONDS", 0)
    host_id = Host.objects.create(name="h1").pk
    missed = {}
    for schedule in _schedules():
        said = _run_command(host_id, schedule)
        if "[report] " + REPORT not in said or said.count("[done]") != 2:
            missed[schedule] = said
    assert not missed, f"{len(missed)} schedules lost the report, e.g. {next(iter(missed.items()))}"
