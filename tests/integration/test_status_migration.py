"""The data migration to one word for each end state rewrites rows written with the old words
so that a run, its request and its agent agree (issue 9 items 7 and 8)."""

import pytest

from tests.helpers import migrate

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
BEFORE = [
    ("scheduler_app", "0003_run_executor_options"),
    ("agents_app", "0002_initial"),
    ("sessions_app", "0001_initial"),
]
AFTER = [
    ("scheduler_app", "0004_one_word_for_each_end_state"),
    ("sessions_app", "0002_turn_done_not_completed"),
]


@pytest.fixture(autouse=True)
def _latest_schema_after():
    yield
    migrate()  # the tests after this one need every migration applied


def _migrate(targets):
    return migrate(targets)


def test_old_rows_get_the_shared_words():
    old = _migrate(BEFORE)
    Agent = old.get_model("agents_app", "Agent")
    Request = old.get_model("scheduler_app", "ScheduleRequest")
    Run = old.get_model("scheduler_app", "Run")
    Sweep = old.get_model("scheduler_app", "Sweep")
    Turn = old.get_model("sessions_app", "ChatTurn")
    Session = old.get_model("sessions_app", "ChatSession")

    def executor(name, status, request=None, run=None, started=False):
        agent = Agent.objects.create(id=name, role="executor", cls_path="x", project="p")
        Agent.objects.filter(pk=name).update(status=status)
        if request:
            Request.objects.create(
                id=f"sched-{name}",
                agent=agent,
                agent_cls_path="x",
                status=request,
                started_at="2026-01-01T00:00:00Z" if started else None,
            )
        if run:
            Run.objects.create(id=f"run-{name}", name=name, command="true", agent=agent, status=run)

    executor("ok", "done", "done", "finished", started=True)
    executor("stopped-running", "stopped", "cancelled", "stopped", started=True)
    executor("stopped-queued", "stopped", "cancelled", "stopped")
    executor("cancelled-queued", "stopped", "cancelled", "queued")  # the bug of item 8
    executor("too-big", "failed", "rejected", "failed")
    executor("lost", "failed", "failed", "lost", started=True)
    executor("outside-queue", "idle")
    Sweep.objects.create(id="sweep-1", name="s", status="completed")
    Turn.objects.create(id="turn-1", session=Session.objects.create(title="t"), status="completed")

    new = _migrate(AFTER)
    Agent = new.get_model("agents_app", "Agent")
    Request = new.get_model("scheduler_app", "ScheduleRequest")
    Run = new.get_model("scheduler_app", "Run")

    def words(name):
        agent = Agent.objects.get(pk=name).status
        request = Request.objects.filter(agent_id=name).values_list("status", flat=True).first()
        run = Run.objects.filter(agent_id=name).values_list("status", flat=True).first()
        return run, request, agent

    assert words("ok") == ("done", "done", "done")
    assert words("stopped-running") == ("stopped", "stopped", "stopped")
    assert words("stopped-queued") == ("cancelled", "cancelled", "cancelled")
    assert words("cancelled-queued") == ("cancelled", "cancelled", "cancelled")
    assert words("too-big") == ("rejected", "rejected", "rejected")
    assert words("lost") == ("lost", "lost", "lost")
    assert words("outside-queue") == (None, None, "cancelled")
    assert new.get_model("scheduler_app", "Sweep").objects.get().status == "done"
    assert new.get_model("sessions_app", "ChatTurn").objects.get().status == "done"

    _migrate(BEFORE)  # and back
    assert old.get_model("scheduler_app", "Run").objects.get(pk="run-ok").status == "finished"
    _migrate(
        [
            ("scheduler_app", "0004_one_word_for_each_end_state"),
            ("sessions_app", "0002_turn_done_not_completed"),
        ]
    )
