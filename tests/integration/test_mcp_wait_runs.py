"""Issue 39 §3: wait_runs over MCP (FastMCP's own client, AgentSys's real ASGI app in process,
a user's API token): it returns within a moment of the metric row, status or alert that meets
its condition, at its timeout saying none held, and refuses bad input in words; the news
travels as it does in production, NOTIFY at commit to the web's one LISTEN connection."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from django.db import connections
from fastmcp import Client

from accounts_app import services as accounts
from agents_app.models import Agent
from agentsys.mcp.research_server import build_server
from agentsys.mcp.run_tools import AgentSysAPI
from scheduler_app.metrics.series import record_rows
from scheduler_app.models import Run, Sweep
from scheduler_app.run_news import runs_changed
from scheduler_app.run_waits import close_reads_connection
from scheduler_app.services import raise_alert
from tests.runtime_harness import DaemonProcess

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

# Logs loss 1/step every 0.2 s, then sleeps on: the run is still running when loss crosses.
TRAIN = (
    'python3 -c "import json, os, time\n'
    "f = open(os.path.join(os.environ['AGENTSYS_RUN_DIR'], 'agent_metrics.jsonl'), 'a')\n"
    "for s in range(1, 30):\n"
    "    f.write(json.dumps({'step': s, 'loss': 1 / s}) + '\\n'); f.flush(); time.sleep(0.2)\n"
    'time.sleep(60)"'
)


@pytest.fixture
def mcp(tmp_path, django_user_model, settings):
    """call(tool, **arguments) → the tool's result; call(..., meanwhile=fn) runs the sync
    `fn` in a thread while the tool is being called (after the wait has begun)."""
    from researchagent.asgi import application

    settings.AGENTSYS_WORKDIR = tmp_path
    user = django_user_model.objects.create_user("ada", password="pw-1234567")
    _, token = accounts.create_token(user=user, name="mcp")
    sweep = Sweep.objects.create(name="wait sweep")
    http = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=application), base_url="http://testserver"
    )
    server = build_server(tmp_path, api=AgentSysAPI("", token, client=http), sweep_id=sweep.pk)

    def call(tool, meanwhile=None, **arguments):
        async def go():
            async with Client(server) as client:
                calling = asyncio.create_task(
                    client.call_tool(tool, arguments, raise_on_error=False, timeout=120)
                )
                if meanwhile is not None:
                    await asyncio.sleep(0.5)  # the wait has begun
                    await asyncio.to_thread(closing(meanwhile))
                return await calling

        return asyncio.run(go())

    call.sweep = sweep
    yield call
    close_reads_connection()


def closing(function):
    def call():
        try:
            function()
        finally:
            connections.close_all()

    return call


def ok(result):
    assert not result.is_error, result.content
    return result.structured_content


def made_run(sweep, name="r", status="running", agent_id=None):
    return Run.objects.create(
        name=name, command="true", status=status, sweep=sweep, agent_id=agent_id
    )


def test_a_metric_crossing_wakes_the_wait_at_once(mcp):
    runs = [made_run(mcp.sweep, f"lr-{i}") for i in range(3)]
    record_rows(agent_id="executor-a", run_id=runs[1].pk, rows=[{"step": 300, "loss": 0.4}])
    landed = {}

    def log_a_low_loss():
        time.sleep(0.5)
        landed["at"] = time.monotonic()
        rows = [{"step": 399, "loss": 0.11}, {"step": 400, "loss": 0.08}]
        record_rows(agent_id="executor-a", run_id=runs[1].pk, rows=rows)

    started = time.monotonic()
    woke = ok(
        mcp(
            "wait_runs",
            meanwhile=log_a_low_loss,
            sweep_id=mcp.sweep.pk,
            until=["failed", {"metric": "loss", "below": 0.1}],
            timeout_s=60,
        )
    )
    answered = time.monotonic()
    assert woke["woke"] and woke["run_id"] == runs[1].pk
    assert woke["condition"] == {"metric": "loss", "below": 0.1}
    assert (
        woke["reason"] == f"run {runs[1].pk} (lr-1) reached loss 0.08 at step 400 (loss below 0.1)"
    )
    assert answered - landed["at"] < 2.0 and answered - started < 10  # not the 5 s recheck
    assert [r["id"] for r in woke["runs"]] == [r.pk for r in runs]
    assert woke["runs"][1]["metrics"] == {"loss": {"last": 0.08, "step": 400}}


def test_a_run_ending_or_an_alert_wakes_it_and_one_already_true_returns_at_once(mcp):
    Agent.objects.create(id="executor-e1", role="executor", cls_path="x", project="p")
    first, second = made_run(mcp.sweep, "a", agent_id="executor-e1"), made_run(mcp.sweep, "b")

    def end_it():
        Run.objects.filter(pk=first.pk).update(status="failed", exit_code=3)

        runs_changed([first.pk])  # autocommit: delivered at once

    woke = ok(mcp("wait_runs", meanwhile=end_it, run_ids=[first.pk, second.pk], until="failed"))
    assert woke["reason"] == f"run {first.pk} (a) failed: failed, exit code 3"

    started = time.monotonic()
    again = ok(mcp("wait_runs", run_ids=[first.pk], until='["any_ended"]', timeout_s=60))
    assert again["woke"] and time.monotonic() - started < 5  # JSON text taken as JSON, too

    def alert():
        raise_alert(agent_id="executor-e1", severity="critical", message="NaN loss at step 41")

    alerted = ok(mcp("wait_runs", meanwhile=alert, run_ids=[first.pk], until="alert"))
    assert (
        alerted["reason"] == f"run {first.pk} (a) raised an alert (critical): NaN loss at step 41"
    )


def test_the_timeout_answers_that_none_held(mcp):
    run = made_run(mcp.sweep)
    started = time.monotonic()
    late = ok(mcp("wait_runs", run_ids=[run.pk], until="all_ended", timeout_s=1))
    assert 1 <= time.monotonic() - started < 5
    assert late["woke"] is False and late["run_id"] is None
    assert late["reason"] == "timed out after 1 s; none of all_ended held"
    assert late["runs"][0]["status"] == "running"


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        ({"until": "any_ended"}, "give run_ids or sweep_id, one of them"),
        ({"until": "any_ended", "run_ids": ["run-1"], "sweep_id": "s"}, "one of them"),
        ({"until": "done", "run_ids": ["run-1"]}, "'done' is not a condition"),
        ({"until": {"metric": "loss"}, "run_ids": ["run-1"]}, "needs one of below or above"),
        ({"until": "failed", "run_ids": ["run-1"], "timeout_s": 0}, "greater than 0"),
        ({"until": "failed", "run_ids": ["run-1"], "timeout_s": 3601}, "less than or equal"),
        ({"until": "failed", "run_ids": ["run-nope"]}, "AgentSys refused (404): no run run-nope"),
        ({"until": "failed", "sweep_id": "sweep-nope"}, "(404): no sweep sweep-nope"),
    ],
)
def test_bad_input_is_a_tool_error_saying_why(mcp, arguments, words):
    started = time.monotonic()
    result = mcp("wait_runs", **arguments)
    assert result.is_error and words in result.content[0].text
    assert time.monotonic() - started < 5


def test_the_endpoint_refuses_no_token_and_a_bad_body_in_words(django_user_model):
    from researchagent.asgi import application

    user = django_user_model.objects.create_user("bo", password="pw-1234567")
    _, token = accounts.create_token(user=user, name="script")
    bodies = [
        {"run_ids": ["r"], "sweep_id": "s", "until": "failed"},
        {"run_ids": ["r"], "until": "nope"},
        {"run_ids": ["r"], "until": "failed", "timeout_s": 0},
        {"run_ids": ["r"]},
    ]

    async def go():
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
            anonymous = await http.post("/api/runs/wait", json={"run_ids": ["r"]})
            wrong = await http.get("/api/runs/wait", headers={"X-Auth-Token": token})
            bearer = {"Authorization": f"Bearer {token}"}
            refused = [await http.post("/api/runs/wait", json=b, headers=bearer) for b in bodies]
            return anonymous, wrong, refused

    anonymous, wrong, refused = asyncio.run(go())
    close_reads_connection()
    assert anonymous.status_code == 401 and "API token is required" in anonymous.json()["detail"]
    assert wrong.status_code == 405
    assert [r.status_code for r in refused] == [422] * 4
    assert [r.json()["detail"] for r in refused] == [
        "give run_ids or sweep_id, one of them",
        "until: 'nope' is not a condition; the words are any_ended, all_ended, failed, alert, "
        'or a metric: {"metric": "loss", "below": 0.1}',
        "timeout_s: Input should be greater than 0",
        "until is required",
    ]


def test_a_real_run_wakes_the_wait_when_its_loss_crosses(mcp):
    made = ok(mcp("create_run", name="train", command=TRAIN, auto_start=True))
    daemon = DaemonProcess("wait-host", AGENTSYS_GPUS="")
    try:
        woke = ok(
            mcp(
                "wait_runs",
                run_ids=[made["id"]],
                until=["any_ended", {"metric": "loss", "below": 0.1}],
                timeout_s=90,
            )
        )
        assert woke["woke"] and woke["condition"] == {"metric": "loss", "below": 0.1}
        assert woke["runs"][0]["status"] == "running"  # long before its end
        assert woke["runs"][0]["metrics"]["loss"]["last"] < 0.1
        assert woke["waited_s"] < 60
        ok(mcp("wait_run", run_id=made["id"], timeout_seconds=1))
    finally:
        daemon.stop()
