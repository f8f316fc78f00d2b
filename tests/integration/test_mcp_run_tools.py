"""Issue 23: the run tools of the research-agent MCP server, called through FastMCP's own
client, going to AgentSys's real REST API (Django's ASGI app in process, a user's API token)
while a real runagentd runs what they start."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from fastmcp import Client

from accounts_app import services as accounts
from agentsys.mcp.research_server import build_server
from agentsys.mcp.run_tools import AgentSysAPI
from scheduler_app.models import Run, Sweep
from tests.runtime_harness import DaemonProcess

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

TRAIN = (
    "python3 -c \"import json, os; f = open(os.path.join(os.environ['AGENTSYS_RUN_DIR'], "
    "'agent_metrics.jsonl'), 'a'); [f.write(json.dumps({'step': s, 'loss': 1 / s}) + '\\n') "
    "for s in (1, 2, 3, 4)]; f.close(); print('line one'); print('line two')\""
)


@pytest.fixture
def tools(tmp_path, django_user_model, settings):
    from researchagent.asgi import application

    settings.AGENTSYS_WORKDIR = tmp_path
    user = django_user_model.objects.create_user("ada", password="pw-1234567")
    _, token = accounts.create_token(user=user, name="mcp")
    sweep = Sweep.objects.create(name="mcp sweep")
    http = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=application), base_url="http://testserver"
    )
    server = build_server(tmp_path, api=AgentSysAPI("", token, client=http), sweep_id=sweep.pk)

    def call(tool, **arguments):
        async def go():
            async with Client(server) as client:
                return await client.call_tool(tool, arguments, raise_on_error=False)

        return asyncio.run(go())

    call.sweep = sweep
    return call


def ok(result):
    assert not result.is_error, result.content
    return result.structured_content


def test_create_start_wait_tail_and_read_a_real_run(tools, tmp_path):
    made = ok(tools("create_run", name="mcp run", command=TRAIN, params={"lr": 0.1}))
    assert made["status"] == "ready"
    run = Run.objects.get(pk=made["id"])
    assert run.sweep_id == tools.sweep.pk  # it joined the agent's sweep
    listed = ok(tools("list_runs", sweep_id=tools.sweep.pk))["result"]
    assert [r["id"] for r in listed] == [made["id"]]

    assert ok(tools("start_run", run_id=made["id"]))["status"] == "queued"
    started = time.monotonic()
    waited = ok(tools("wait_run", run_id=made["id"], timeout_seconds=1))
    assert not waited["ended"] and waited["status"] == "queued"  # no runagentd yet
    assert time.monotonic() - started < 5

    daemon = DaemonProcess("mcp-host", AGENTSYS_GPUS="")
    try:
        done = ok(tools("wait_run", run_id=made["id"], timeout_seconds=60))
    finally:
        daemon.stop()
    assert done["ended"] and (done["status"], done["exit_code"]) == ("done", 0)
    tail = ok(tools("tail_run_log", run_id=made["id"], lines=1))
    assert tail["lines"] == ["line two"]
    read = ok(tools("get_run", run_id=made["id"]))
    assert read["metrics"]["loss"]["last"] == 0.25 and read["metrics"]["loss"]["points"] == 4
    assert read["params"] == {"lr": 0.1}


@pytest.mark.parametrize(
    ("tool", "arguments", "words"),
    [
        ("get_run", {"run_id": "run-nope"}, "AgentSys refused (404)"),
        ("get_run", {"run_id": "../../etc"}, "pattern"),
        ("get_run", {}, "run_id"),
        ("start_run", {"run_id": "x" * 1_000_000}, "at most 40"),
        ("create_run", {"name": "n", "command": ""}, "at least 1"),
        ("create_run", {"name": "n", "command": "x", "gpu_required": -1}, "greater than"),
        ("create_run", {"name": "n", "command": "x", "params": {"bad name": 1}}, "option name"),
        ("wait_run", {"run_id": "run-1", "timeout_seconds": 301}, "less than or equal to 300"),
        ("list_runs", {"status": "sleeping"}, "status must be one of"),
        ("tail_run_log", {"run_id": "run-nope"}, "AgentSys refused (404)"),
    ],
)
def test_bad_arguments_are_tool_errors_saying_why(tools, tool, arguments, words):
    result = tools(tool, **arguments)
    assert result.is_error
    assert words in result.content[0].text


def test_create_runs_makes_a_batch_in_the_agents_sweep_or_names_the_bad_run(tools):
    runs = [{"name": f"r{i}", "command": "true", "params": {"seed": i}} for i in range(3)]
    made = ok(tools("create_runs", runs=runs))["result"]
    assert [(r["name"], r["status"], r["params"]) for r in made] == [
        (f"r{i}", "ready", {"seed": i}) for i in range(3)
    ]
    assert set(Run.objects.values_list("sweep_id", flat=True)) == {tools.sweep.pk}
    started = ok(tools("create_runs", runs=runs[:2], auto_start=True))["result"]
    assert [r["status"] for r in started] == ["queued", "queued"]  # no runagentd yet
    refused = tools(
        "create_runs", runs=[runs[0], {"name": "x", "command": "t", "params": {"a b": 1}}]
    )
    assert refused.is_error and "run 1 params:" in refused.content[0].text
    assert Run.objects.count() == 5


def test_create_run_takes_the_rest_names_and_reaches_the_persons_project(tools, tmp_path):
    from hosts_app.models import Host

    Host.objects.create(name="big", labels={"gpu_memory_gb": 80})
    (tmp_path / "project").mkdir()
    other = Sweep.objects.create(name="theirs")
    made = ok(
        tools(
            "create_run",
            name="rest-shaped",
            command="python train.py",
            workdir="project",  # the server's workdir's
            env={"SEED": 3},
            venv=".venv",
            params={"lr": 0.1},
            requires={"gpu_memory_gb": 40},
            sweep_id=other.pk,
            auto_start=True,
        )
    )
    run = Run.objects.get(pk=made["id"])
    assert run.workdir == str(tmp_path / "project") and run.sweep_id == other.pk
    assert run.executor_options["env"] == {"SEED": "3"} and run.executor_options["venv"] == ".venv"
    assert run.requires == {"gpu_memory_gb": 40} and run.params == {"lr": 0.1}
    assert made["status"] == "queued"


@pytest.mark.parametrize(
    ("arguments", "sentence"),
    [
        (
            {"name": "n", "command": "x", "start": True},
            "create_run refused: start is not one of its arguments (name, command, params, "
            "gpu_required, workdir, env, venv, requires, sweep_id, stop_when, auto_start).",
        ),
        (
            {"name": "n", "command": "x", "gpu_required": "two"},
            "create_run refused: gpu_required: input should be a valid integer, unable to parse "
            "string as an integer.",
        ),
        ({"command": "x"}, "create_run refused: name is required."),
        (
            {"name": "n", "command": "x", "env": {"CUDA_VISIBLE_DEVICES": "0"}},
            "env CUDA_VISIBLE_DEVICES is set by AgentSys for each run; it cannot be given",
        ),
    ],
)
def test_a_bad_call_is_one_sentence_naming_the_field(tools, arguments, sentence):
    result = tools("create_run", **arguments)

    assert result.is_error
    text = result.content[0].text
    assert sentence in text
    assert "pydantic" not in text and "input_value" not in text and "\n" not in text.strip()
    assert not Run.objects.exists()


def test_stop_rules_pass_through_and_a_bad_one_is_named(tools):
    # Issue 39 §1: create_run and create_runs take `stop_when` as POST /api/runs does.
    rule = {"metric": "loss", "above": 2.0, "after_step": 100}
    made = ok(tools("create_run", name="ruled", command="python t.py", stop_when=[rule]))
    assert Run.objects.get(pk=made["id"]).executor_options["stop_when"] == [rule]
    [made] = ok(tools("create_runs", runs=[{"name": "b", "command": "x"}], stop_when=[rule]))[
        "result"
    ]
    assert Run.objects.get(pk=made["id"]).executor_options["stop_when"] == [rule]

    refused = tools("create_run", name="n", command="x", stop_when=[{"metric": "loss"}])
    assert refused.is_error
    assert 'stop_when[0] {"metric": "loss"}: a rule takes exactly one of' in refused.content[0].text
    assert Run.objects.count() == 2


def test_a_revoked_token_is_refused(tools):
    from accounts_app.models import ApiToken

    accounts.revoke_token(token_id=ApiToken.objects.get().pk)
    result = tools("list_runs")
    assert result.is_error and "AgentSys refused (401)" in result.content[0].text
