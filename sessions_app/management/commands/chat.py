"""`manage.py chat MESSAGE [--mode wild|auto|agent] [--session ID] [--wait-reports]`: talk to
the session agent from the shell (with `make run` going), the reply printed as it streams.
With --wait-reports it stays until the research it started has reported back."""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand, CommandError

from agentsys.types import LIVE_TURN_STATUSES
from common.db_outage import DATABASE_ERRORS, first_line, wait_for_database_saying
from events_app.events import chat_stream
from events_app.selectors import events_after
from sessions_app import services, turns
from sessions_app.chat_console import ActionTagFilter, action_line
from sessions_app.models import ChatSession, ChatTurn

POLL_SECONDS = 0.1
READ_LIMIT = 500  # events a read prints


class Command(BaseCommand):
    help = "Send a chat message to the session agent and print its streamed reply."

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._filters: dict[str, ActionTagFilter] = {}  # text part id -> its tag filter

    def add_arguments(self, parser):
        parser.add_argument("message")
        parser.add_argument("--mode", default="auto", choices=["wild", "auto", "agent"])
        parser.add_argument("--session", default="", help="Chat session id (default: a new one)")
        parser.add_argument(
            "--wait-reports",
            action="store_true",
            help="Stay until the agents this chat started have ended and been reported",
        )
        parser.add_argument("--timeout", type=float, default=1800)

    def handle(self, *args, **options):
        try:
            session, turn = self._submit(options)
        except DATABASE_ERRORS as error:  # one line, not a traceback; nothing was sent
            raise CommandError(
                f"the database is unavailable ({first_line(error)}); nothing was sent: try again"
                " once it is back"
            ) from None
        self.stdout.write(f"chat session {session.pk} (mode {options['mode']})")
        deadline = time.monotonic() + options["timeout"]
        self._print_until(session, turn.after_seq, deadline, options["wait_reports"])

    def _submit(self, options):
        if options["session"]:
            session = ChatSession.objects.filter(pk=options["session"]).first()
            if session is None:
                raise CommandError(f"--session: no chat session {options['session']!r}")
        else:
            session = services.create_session()
        try:
            turn = turns.submit_turn(
                session=session, message=options["message"], mode=options["mode"]
            )
        except turns.TurnRefused as refused:
            raise CommandError(str(refused)) from None
        return session, turn

    def _wait(self, fn, /, *args, **kwargs):
        """A read that waits out an outage (the reply goes on meanwhile), saying so once."""
        return wait_for_database_saying(self.stderr.write, fn, *args, **kwargs)

    def _print_until(self, session, after: int, deadline: float, wait_reports: bool) -> None:
        started: set[str] = set()
        stream = chat_stream(session.pk)
        live_turns = ChatTurn.objects.filter(session=session, status__in=LIVE_TURN_STATUSES)
        while time.monotonic() < deadline:
            # In this order, as runagentd writes: a loop's report turn is queued before it is
            # done, and a turn's events are in before it is done. So with every child seen
            # reported, then no turn live, the read after holds all of their events; only a
            # child first seen in that read (the reply ended meanwhile) is waited for again.
            unreported = wait_reports and self._wait(self._unreported, started)
            live = self._wait(live_turns.exists)
            known = len(started)
            events = self._wait(events_after, stream=stream, after_seq=after, limit=READ_LIMIT)
            for event in events:
                after = event.seq
                self._show(event.kind, event.payload, started)
            if not (unreported or live or len(started) > known or len(events) == READ_LIMIT):
                return
            time.sleep(POLL_SECONDS)
        raise CommandError("timed out; the chat goes on (follow it with GET .../stream)")

    def _unreported(self, started: set[str]) -> bool:
        reported = ChatTurn.objects.filter(synthetic=True, variables__child_id__in=started)
        return reported.count() < len(started)

    def _show(self, kind: str, payload: dict, started: set[str]) -> None:
        out = self.stdout
        if kind == "part_delta" and payload.get("ptype") == "text":
            part = self._filters.setdefault(payload.get("id", ""), ActionTagFilter())
            out.write(part.feed(payload.get("delta", "")), ending="")
            out.flush()
            return
        if kind in {"l1_action", "session_status"}:
            self._flush_text()  # what the reply said before it acted or ended
        if kind == "part_update":
            out.write(f"\n  [tool {payload.get('tool')}: {payload.get('status')}]")
        elif kind == "system_message":
            # The one-line notice ("The research loop … ended: done."): the report itself is
            # the synthetic reply that follows, which would otherwise repeat its first line.
            notice = payload.get("notice")
            if isinstance(notice, dict) and notice.get("text"):
                line = f"{notice['text']} ({notice.get('href', '')})"
            else:
                line = (str(payload.get("content", "")).splitlines() or [""])[0]
            out.write("\n\n[report] " + line)
        elif kind == "l1_action":
            if not payload.get("error"):
                started.add(payload.get("agent_id", ""))
            out.write("\n  " + action_line(payload))
        elif kind == "error":
            out.write(f"\n  [error: {payload.get('message')}]")
        elif kind == "session_status":
            out.write(f"\n  [{payload.get('outcome')}]\n")

    def _flush_text(self) -> None:
        for part in self._filters.values():
            self.stdout.write(part.flush(), ending="")
        self._filters.clear()
