"""The sweep table's order and filters as PostgreSQL applies them (issue 21): the edge cases
a param or a metric brings (mixed types, booleans, NaN, ±inf, objects, huge integers, missing
values) sort and filter by the rules of scheduler_app.sweeps.table_rules, and pages of tied
runs never share or skip one."""

import math
from datetime import UTC, datetime
from urllib.parse import urlencode

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler_app.models import MetricSeries, Run, Sweep

pytestmark = pytest.mark.django_db

HUGE = 10**400  # a JSON integer no float holds


def run_of(sweep, name, params, loss=None, **fields):
    run = Run.objects.create(name=name, command="true", sweep=sweep, params=params, **fields)
    if loss is not None:
        MetricSeries.objects.create(
            run=run, agent_id=f"exec-{sweep.pk}-{name}", key="loss", last_value=loss, points=1
        )
    return run


def table(api, sweep, **query):
    response = api("get", f"/api/sweeps/{sweep.id}/table?{urlencode(query, doseq=True)}")
    assert response.status_code == 200, response.content
    return response.json()


def names(api, sweep, **query):
    return [row["name"] for row in table(api, sweep, **query)["rows"]]


@pytest.fixture
def mixed(api):
    """Runs made in this order (the last the newest), each with a param x of another kind
    (and some with a loss)."""
    sweep = Sweep.objects.create(name="mixed")
    losses = {"two": 0.5, "yes": math.nan, "huge": -math.inf}
    for name, x in [
        ("two", 2),
        ("ten", 10.0),
        ("beta", "beta"),
        ("Alpha", "Alpha"),
        ("yes", True),
        ("object", {"a": 1}),
        ("null", None),
        ("huge", HUGE),
    ]:
        run_of(sweep, name, {"x": x}, losses.get(name))
    run_of(sweep, "none", {})
    return sweep


def test_numbers_sort_as_numbers_then_strings_folded_then_missing_newest_first(api, mixed):
    # Booleans are strings ("true"); objects and null are no value.
    assert names(api, mixed, sort="param.x") == [
        "two",
        "ten",
        "huge",
        "Alpha",
        "beta",
        "yes",
        "none",
        "null",
        "object",
    ]
    assert names(api, mixed, sort="-param.x") == [
        "huge",
        "ten",
        "two",
        "yes",
        "beta",
        "Alpha",
        "none",
        "null",
        "object",
    ]
    huge = next(r for r in table(api, mixed)["rows"] if r["name"] == "huge")
    assert huge["params"] == {"x": HUGE}


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ("param.x:eq:2.0", ["two"]),  # as a number
        ("param.x:eq:TRUE", ["yes"]),  # a boolean as its word, folded
        ("param.x:eq:alpha", ["Alpha"]),
        ("param.x:ne:beta", ["none", "huge", "null", "object", "yes", "Alpha", "ten", "two"]),
        ("param.x:contains:ph", ["Alpha"]),
        ("param.x:gt:5", ["huge", "ten"]),  # numbers only: no string is > 5
        ("param.x:gt:1e300", ["huge"]),  # exactly, not as a float
        ("param.x:lt:inf", ["huge", "ten", "two"]),
        ("param.x:ge:-inf", ["huge", "ten", "two"]),
        ("param.x:gt:inf", []),
        ("param.x:eq:inf", []),
        ("param.x:le:nan", []),  # NaN orders nothing
        ("param.x:between:2,10", ["ten", "two"]),
    ],
)
def test_a_params_filters_hold_by_its_values_kind(api, mixed, where, expected):
    assert names(api, mixed, where=where) == expected


@pytest.fixture
def losses(api):
    sweep = Sweep.objects.create(name="losses")
    for name, loss in [
        ("one", 1.0),
        ("inf", math.inf),
        ("minus", -math.inf),
        ("nan", math.nan),
        ("half", 0.5),
    ]:
        run_of(sweep, name, {}, loss)
    run_of(sweep, "none", {})
    return sweep


def test_nan_and_missing_stay_last_either_way_and_infinities_are_numbers(api, losses):
    assert names(api, losses, sort="metric.loss.last") == [
        "minus",
        "half",
        "one",
        "inf",
        "nan",
        "none",
    ]
    assert names(api, losses, sort="-metric.loss.last") == [
        "inf",
        "one",
        "half",
        "minus",
        "nan",
        "none",
    ]


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ("metric.loss.last:le:inf", ["half", "minus", "inf", "one"]),  # never NaN
        ("metric.loss.last:eq:-inf", ["minus"]),
        ("metric.loss.last:eq:nan", []),
        ("metric.loss.last:ne:nan", ["none", "half", "nan", "minus", "inf", "one"]),
        ("metric.loss.last:ne:1", ["none", "half", "nan", "minus", "inf"]),
        ("metric.loss.last:eq:one", []),  # a word is no number
        ("metric.loss.last:between:0,1", ["half", "one"]),
        ("metric.loss.last:contains:nan", ["nan"]),
    ],
)
def test_a_metrics_filters_hold_on_numbers_only(api, losses, where, expected):
    assert names(api, losses, where=where) == expected


def test_tied_runs_are_newest_first_then_by_id_and_pages_never_share_one(api):
    sweep = Sweep.objects.create(name="ties")
    for i in range(7):
        run_of(sweep, f"r{i}", {"lr": 0.1 if i % 2 else 0.2}, loss=0.5)
    # Four made at the same moment: only their ids tell them apart.
    same = datetime(2026, 1, 1, tzinfo=UTC)
    tied = Run.objects.filter(sweep=sweep, name__in=["r1", "r2", "r4", "r6"])
    tied.update(created_at=same)
    by_id = sorted(tied.values_list("id", flat=True), reverse=True)
    whole = table(api, sweep, sort="metric.loss.last", limit=100)["rows"]
    untied = ["r5", "r3", "r0"]  # newest first; the tied ones are older than all of them
    assert [r["name"] for r in whole[:3]] == untied
    assert [r["run_id"] for r in whole[3:]] == by_id
    for sort in ("metric.loss.last", "-param.lr", "param.lr", "status"):
        order = [r["run_id"] for r in table(api, sweep, sort=sort, limit=100)["rows"]]
        pages = [
            r["run_id"]
            for offset in range(0, 7, 2)
            for r in table(api, sweep, sort=sort, limit=2, offset=offset)["rows"]
        ]
        assert pages == order and len(set(order)) == 7


def test_a_page_past_the_end_is_empty_and_still_counts_the_runs_that_pass(api, losses):
    body = table(api, losses, where="metric.loss.last:between:0,1", offset=50, limit=10)
    assert body["rows"] == [] and body["total"] == 2 and body["run_count"] == 6


def test_every_status_filters_ready_and_rejected_too(api):
    sweep = Sweep.objects.create(name="statuses")
    for status in ("ready", "queued", "done", "rejected", "cancelled"):
        run_of(sweep, status, {}, status=status)
    assert names(api, sweep, status="ready,rejected", sort="name") == ["ready", "rejected"]


COLUMNS = ["name", "status", "created_at", "duration_s", "exit_code", "param.x"]
COLUMNS += [f"metric.loss.{stat}" for stat in ("last", "min", "max")]
OPS = ["eq", "ne", "contains", "lt", "le", "gt", "ge", "between"]
VALUES = st.one_of(
    st.sampled_from(["0", "-1e309", "1e400", "nan", "inf", "-inf", "1_0", " 2 ", "0,1", ","]),
    st.text(alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00")),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    clauses=st.lists(st.tuples(st.sampled_from(COLUMNS), st.sampled_from(OPS), VALUES), max_size=3),
    sort=st.sampled_from(COLUMNS),
    descending=st.booleans(),
)
def test_any_sort_and_filter_text_is_a_table_or_a_422_never_a_server_error(
    api, mixed, clauses, sort, descending
):
    where = [f"{column}:{op}:{value}" for column, op, value in clauses]
    query = urlencode({"sort": ("-" if descending else "") + sort, "where": where}, doseq=True)
    response = api("get", f"/api/sweeps/{mixed.id}/table?{query}")
    assert response.status_code in (200, 422), response.content
    if response.status_code == 200:
        body = response.json()
        assert len(body["rows"]) == min(body["total"], 100) and body["run_count"] == 9
