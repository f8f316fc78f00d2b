"""Issue 38 §1: /api/ledger groups SpendDay, the per-day sums that triggers keep beside the
entries, instead of 10^6 entries. Its answers must stay the entries' own: every group's
sums, in the same order, at every group_by, with `since` at a midnight, inside a day or
nowhere; and the days must stay exact through every way an entry is written (a duplicate
skipped, a backdated entry, a withdrawn run, a bulk load)."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.db.models import Count, Sum
from django.db.models.functions import TruncDate

from agents_app.models import Agent
from agentsys.types import new_agent_id
from ledger_app import selectors
from ledger_app.models import SpendDay, SpendEntry
from ledger_app.services import record_llm_steps, record_run_gpu, withdraw_run_gpu

pytestmark = pytest.mark.django_db

# Noon two days back, so that the spread below has whole days and a partial one either side.
NOON = datetime.now(UTC).replace(hour=12, minute=0, second=0, microsecond=0) - timedelta(days=2)
MIDNIGHT = NOON.replace(hour=0)


def step(key: str, usd: float, model: str = "m-a") -> dict:
    return {"key": key, "usd": usd, "model": model, "input_tokens": 100, "output_tokens": 7}


def at(key: str, when: datetime) -> None:
    """Move entry `key` to `when`: an UPDATE, which the triggers move between days too."""
    assert SpendEntry.objects.filter(key=key).update(created_at=when) == 1


def spread(django_user_model) -> None:
    grace = django_user_model.objects.create_user("grace", password="x" * 12)
    loops = [
        Agent.objects.create(id=new_agent_id("research"), role="research", cls_path="x")
        for _ in range(2)
    ]
    record_llm_steps(steps=[step("a1", 0.1), step("a2", 0.2, "m-b")], agent_id=loops[0].pk)
    record_llm_steps(steps=[step("a1", 0.1)], agent_id=loops[0].pk)  # again: skipped
    record_llm_steps(steps=[step("b1", 0.4)], agent_id=loops[1].pk)
    record_llm_steps(steps=[step("c1", 0.8)], chat_session_id="chat-1", user_id=grace.pk)
    record_llm_steps(steps=[step("c2", 0.05)], chat_session_id="chat-2", user_id=None)
    for i, (ended, host) in enumerate(
        [
            (MIDNIGHT - timedelta(minutes=30), "gpu-1"),  # the day before
            (MIDNIGHT, "gpu-1"),  # the day's first instant
            (NOON - timedelta(hours=1), "gpu-2"),  # before since at noon
            (NOON + timedelta(hours=1), "gpu-2"),  # after it
            (NOON + timedelta(days=1), "gpu-3"),  # a whole day later
        ]
    ):
        record_run_gpu(
            run_id=f"run-{i}",
            gpus=i + 1,
            started=ended - timedelta(minutes=10 * (i + 1)),
            ended=ended,
            host=host,
            loop_id=loops[i % 2].pk,
            user_id=grace.pk if i % 2 else None,
        )
    record_run_gpu(
        run_id="run-lost", gpus=8, started=NOON, ended=NOON + timedelta(hours=2), host="gpu-9"
    )
    withdraw_run_gpu(run_ids=["run-lost"])  # a DELETE: its day and cause are gone again
    at("llm:a1", MIDNIGHT - timedelta(days=1, microseconds=1))
    at("llm:a2", NOON)  # at since to the microsecond: counted
    at("llm:b1", NOON - timedelta(microseconds=1))  # just before: not
    at("llm:c1", MIDNIGHT + timedelta(days=1))


def from_entries(group_by: str, since: datetime | None) -> tuple[list, dict]:
    """What /api/ledger answered before SpendDay: the entries grouped, sorted, summed."""
    column = selectors.GROUPS[group_by]
    rows = list(
        selectors.entries(since=since)
        .values(column)
        .annotate(**selectors.SUMS)
        .order_by("-llm_usd", "-gpu_seconds", column)
    )
    total = {
        name: sum((r[name] for r in rows), zero) for name, (_, zero) in selectors.SUMMED.items()
    }
    groups = [
        {"key": "" if r[column] is None else str(r[column]), **selectors._out(r)} for r in rows
    ]
    return groups, selectors._out(total)


def assert_days_are_the_entries_sums() -> None:
    """Each SpendDay row is one UTC day and cause's entries summed; no row sums none."""
    cause = ["loop_id", "chat_session_id", "user_id", "sweep_id", "model", "host"]
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL timezone = 'UTC'")  # TruncDate's day is the UTC one
        summed = {
            (r["day"], *(r[c] for c in cause)): (
                r["llm_tokens"],
                r["llm_usd"],
                r["gpu_seconds"],
                r["entries"],
            )
            for r in SpendEntry.objects.annotate(day=TruncDate("created_at", tzinfo=UTC))
            .values("day", *cause)
            .annotate(
                llm_tokens=Sum(selectors.TOKENS),
                llm_usd=Sum("usd"),
                gpu_seconds=Sum("gpu_seconds"),
                entries=Count("id"),
            )
            .order_by()
        }
    days = {
        (d.day, *(getattr(d, c) for c in cause)): (
            d.llm_tokens,
            d.llm_usd,
            d.gpu_seconds,
            d.entries,
        )
        for d in SpendDay.objects.all()
    }
    assert days == summed
    assert SpendDay.objects.filter(entries__lte=0).count() == 0


SINCES = {
    "none": None,
    "noon": NOON,  # inside a day: its rest from the entries, the days after from SpendDay
    "midnight": MIDNIGHT,  # a whole day on
    "a day's last instant": MIDNIGHT + timedelta(days=1, microseconds=-1),
    "tomorrow": MIDNIGHT + timedelta(days=3),
    "in another offset": NOON.astimezone(selectors.timezone.get_fixed_timezone(-330)),
}


@pytest.mark.parametrize("since", SINCES.values(), ids=SINCES.keys())
@pytest.mark.parametrize("group_by", selectors.GROUPS)
def test_the_days_answer_as_the_entries_at_every_group_and_since(
    django_user_model, group_by, since
):
    spread(django_user_model)
    assert_days_are_the_entries_sums()
    assert selectors.grouped_with_total(group_by, since=since) == from_entries(group_by, since)


def test_the_api_answers_as_the_entries(api, django_user_model):
    spread(django_user_model)
    since = NOON.isoformat().replace("+00:00", "Z")
    body = api("get", f"/api/ledger?group_by=host&since={since}").json()
    groups, total = from_entries("host", NOON)
    assert body["groups"] == groups and body["total"] == {"key": "", **total}
    # The model steps (no host) first, then the runs since noon: gpu-2's later one only.
    assert [g["key"] for g in groups] == ["", "gpu-3", "gpu-2"]
    assert groups[2]["gpu_hours"] == pytest.approx(4 * 40 / 60)


def test_a_bulk_load_is_summed_once_and_a_truncate_empties_the_days():
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            INSERT INTO {SpendEntry._meta.db_table} (
                key, kind, created_at, input_tokens, output_tokens, reasoning_tokens,
                cache_read_tokens, cache_write_tokens, usd, model, provider, gpu_seconds,
                gpus, wall_seconds, host, run_id, sweep_id, loop_id, agent_id,
                chat_session_id, chat_turn_id, user_id)
            SELECT 'bulk:' || i, 'llm', %s - i * interval '1 hour', i, 0, 0, 0, 0, 0.001, 'm',
                   '', 0, 0, 0, '', '', '', 'loop-' || (i %% 3), '', '', '', NULL
            FROM generate_series(1, 200) AS i
            """,  # noqa: S608
            [NOON],
        )
    assert_days_are_the_entries_sums()
    assert sum(d.entries for d in SpendDay.objects.all()) == 200
    for group_by in selectors.GROUPS:
        for since in SINCES.values():
            assert selectors.grouped_with_total(group_by, since=since) == from_entries(
                group_by, since
            )
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {SpendEntry._meta.db_table}")
        assert not SpendDay.objects.exists()
        # Both at once, as Django's flush between transactional tests does.
        cursor.execute(f"TRUNCATE {SpendEntry._meta.db_table}, {SpendDay._meta.db_table}")
