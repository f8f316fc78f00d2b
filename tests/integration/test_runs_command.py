"""`manage.py runs stop`: queued runs are cancelled through the API's service; bad arguments
are explained. (Running runs with runagentd down: tests/e2e/test_serve_supervision.py.)"""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from scheduler_app.models import Run, RunStatus
from scheduler_app.runs import launch as runs

pytestmark = pytest.mark.django_db


def test_stop_all_cancels_queued_runs_without_a_daemon():
    queued = runs.create_run(name="q", command="sleep 1", auto_start=True)
    ready = runs.create_run(name="r", command="sleep 1")
    assert queued.status == RunStatus.QUEUED
    out = io.StringIO()
    call_command("runs", "stop", "--all", stdout=out)
    assert Run.objects.get(pk=queued.pk).status == RunStatus.CANCELLED  # it never started
    assert Run.objects.get(pk=ready.pk).status == RunStatus.READY  # not started: left alone
    assert f"{queued.pk}: cancelled" in out.getvalue()


def test_stop_needs_runs_or_all_and_names_unknown_ones():
    with pytest.raises(CommandError, match="or pass --all"):
        call_command("runs", "stop")
    with pytest.raises(CommandError, match="no such run: run-nope"):
        call_command("runs", "stop", "run-nope")
