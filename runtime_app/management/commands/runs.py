"""`manage.py runs stop --all` (or `runs stop RUN_ID ...`): stop runs, with or without a
runagentd. A live runagentd stops them the way `POST /api/runs/{id}/stop` does; a run still
going when none is there (or after it had its time) is ended here, its whole session."""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand, CommandError

from hosts_app.liveness import host_is_alive
from runtime_app import run_processes
from scheduler_app import selectors as host_selectors
from scheduler_app.models import Run, RunStatus
from scheduler_app.runs import launch as runs

DAEMON_WAIT_SECONDS = 20.0
REASON = "manage.py runs stop"


class Command(BaseCommand):
    help = "Stop queued and running runs (works while runagentd is down)."

    def add_arguments(self, parser):
        actions = parser.add_subparsers(dest="action", required=True)
        stop = actions.add_parser("stop", help="Stop runs")
        stop.add_argument("run_ids", nargs="*")
        stop.add_argument("--all", action="store_true", help="Every queued and running run")

    def handle(self, *args, action, run_ids, **options):
        every = options["all"]
        if bool(run_ids) == bool(every):
            raise CommandError("name the runs to stop, or pass --all (not both)")
        active = Run.objects.filter(status__in=RunStatus.open())
        targets = list(active if every else Run.objects.filter(pk__in=run_ids))
        if missing := set(run_ids) - {run.pk for run in targets}:
            raise CommandError(f"no such run: {', '.join(sorted(missing))}")
        daemon = any(host_is_alive(h) for h in host_selectors.hosts_with_gpus())
        asked = []
        for run in targets:
            if run.status not in RunStatus.open():
                self.stdout.write(f"{run.pk}: {run.status}, nothing to stop")
            elif run.status == RunStatus.QUEUED or daemon:
                runs.stop_run(run_id=run.pk)  # the API's own service
                asked.append(run.pk)
            else:
                self._end_here(run)
        self._wait_for_daemon(asked if daemon else [])
        for run in Run.objects.filter(pk__in=asked):
            self.stdout.write(f"{run.pk}: {run.status}")

    def _wait_for_daemon(self, run_ids: list[str]) -> None:
        deadline = time.monotonic() + DAEMON_WAIT_SECONDS
        pending = Run.objects.filter(pk__in=run_ids, status__in=RunStatus.live())
        while pending.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        for run in pending:  # runagentd did not get to it: end it here
            self._end_here(run)

    def _end_here(self, run: Run) -> None:
        alive = run_processes.kill_and_mark_stopped(run, reason=REASON)
        ended = "its processes ended" if alive else "its command had already ended"
        self.stdout.write(f"{run.pk}: stopped ({ended}; no runagentd did it)")
