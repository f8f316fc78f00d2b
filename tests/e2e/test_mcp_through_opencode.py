"""Issue 23's must-show, through the real OpenCode (no fake): the scripted model emits MCP tool
calls, OpenCode runs them on the research-agent server its workdir's opencode.json names, and
the tests read the outcome from OpenCode's own tool parts (GET /session/{id}/message).

- quick_bash past its timeout: the result says timed_out and no process of it is left;
- list_directory: each escape (`..`, an absolute path elsewhere, a symlink out) a tool error
  with the reason;
- create_run + start_run + wait_run against a live AgentSys (daphne, runagentd, a user's
  token): a real run in GET /api/runs under the loop's sweep, ended done;
- the server killed mid-call: OpenCode's tool error; OpenCode does not restart the server by
  itself, a research loop's next prompt does (and the new server kills the orphaned command).
"""

from __future__ import annotations

import asyncio
import secrets
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from accounts_app import services as accounts
from agentsys.opencode.server import DEMO_MODEL, DEMO_PROVIDER
from agentsys.research.llm import OpenCodeGateway
from scheduler_app.models import Run, Sweep
from tests.helpers import wait_until
from tests.live_clients import Web
from tests.mcp_opencode import (
    Workdir,
    call,
    kill_all,
    output_of,
    processes_with,
    research_servers,
    script,
    start_opencode,
    write_config,
)
from tests.runtime_harness import DaemonProcess

pytestmark = pytest.mark.slow

BASH = "research-agent_quick_bash"
LIST = "research-agent_list_directory"


@pytest.fixture(scope="module")
def opencode(scripted_llm, tmp_path_factory):
    server = start_opencode(scripted_llm, tmp_path_factory.mktemp("mcp-opencode"))
    yield server
    server.stop()


@pytest.fixture
def project(tmp_path, opencode):
    work = tmp_path / "project"
    work.mkdir()
    (work / "notes.md").write_text("notes\n")
    write_config(work)
    place = Workdir(opencode, work)
    yield place
    place.disconnect("research-agent")  # OpenCode keeps a directory's server until told
    place.close()


def loop_gateway(project: Workdir, title: str) -> OpenCodeGateway:
    """A research loop's way to its model, in `project`."""
    return OpenCodeGateway(
        url=project.opencode.url,
        provider=DEMO_PROVIDER,
        model=DEMO_MODEL,
        workdir=project.directory,
        title=title,
        password=project.opencode.password,
        # What is tested is the MCP server, not the bound: a machine running the suite on
        # four workers took over the default 10 s to start it (CI, stop 46).
        mcp_check_seconds=60,
    )


def marker(seconds: int) -> str:
    """A sleep argument no other process has: `seconds` and a random fraction."""
    return f"{seconds}.{secrets.randbelow(10**9):09d}"


def test_quick_bash_past_its_timeout_is_killed_with_every_child(project, scripted_llm):
    mark = marker(100)
    # A child in the background, one that left the session with setsid, one in the front.
    command = f"sleep {mark} & setsid sleep {mark} & sleep {mark}; "
    scripted_llm.load(script("bash-timeout", call(BASH, command=command, timeout_seconds=1)))
    try:
        session = project.prompt("bash-timeout")
        [part] = project.tool_parts(session)
        assert part["tool"] == BASH
        result = output_of(part)
        assert result["timed_out"] is True and result["exit_code"] is None, result
        assert "killed" in result["note"]
        took = part["state"]["time"]["end"] - part["state"]["time"]["start"]
        assert took < 10_000, f"the call took {took} ms"
        left = [p.info["cmdline"] for p in processes_with(mark)]
        assert left == [], f"left running after the tool result: {left}"
    finally:
        kill_all(processes_with(mark))


def test_list_directory_refuses_each_escape_as_a_tool_error_saying_why(
    project, scripted_llm, tmp_path
):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("not for the model\n")
    (project.path / "link").symlink_to(outside)
    scripted_llm.load(
        script(
            "list-escapes",
            call(LIST, path=".."),
            call(LIST, path=str(outside)),
            call(LIST, path="link"),
            call(LIST, path="."),
        )
    )
    session = project.prompt("list-escapes")
    parts = project.tool_parts(session)
    assert [p["tool"] for p in parts] == [LIST] * 4
    up, absolute, through_link, here = parts
    for part in (up, absolute, through_link):
        assert part["state"]["status"] == "error", part["state"]
    assert up["state"]["error"] == f"'..' is outside the workdir {project.path}"
    assert absolute["state"]["error"] == f"{str(outside)!r} is outside the workdir {project.path}"
    assert through_link["state"]["error"] == (
        f"'link' is outside the workdir {project.path} (through a symlink)"
    )
    listing = output_of(here)
    assert {e["name"]: e["type"] for e in listing["entries"]} == {
        "link": "symlink",
        "notes.md": "file",
        "opencode.json": "file",
    }
    assert "secret.txt" not in str(parts)


@pytest.mark.django_db(transaction=True)
def test_create_start_and_wait_for_a_real_run_in_the_loops_sweep(
    opencode, scripted_llm, tmp_path, django_user_model
):
    work = tmp_path / "project"
    work.mkdir()
    user = django_user_model.objects.create_user("mcp-agent", password="pw-1234567")
    _, token = accounts.create_token(user=user, name="mcp through opencode")
    sweep = Sweep.objects.create(name="the loop's sweep")
    web = Web(AGENTSYS_WORKDIR=str(work))
    daemon = DaemonProcess("mcp-opencode-host", AGENTSYS_GPUS="", AGENTSYS_WORKDIR=str(work))
    environment = {
        "AGENTSYS_URL": web.url,
        "AGENTSYS_API_TOKEN": token,
        "AGENTSYS_SWEEP_ID": sweep.pk,
    }
    write_config(work, environment=environment)
    place = Workdir(opencode, work)
    try:
        scripted_llm.load(
            script(
                "mcp-create",
                call(
                    "research-agent_create_run",
                    name="via opencode",
                    command="echo made through MCP",
                ),
            )
        )
        session = place.prompt("mcp-create")
        made = output_of(place.tool_parts(session)[-1])
        assert made["status"] == "ready", made
        assert Run.objects.get(pk=made["id"]).sweep_id == sweep.pk  # the loop's sweep

        # The model reads the id from the tool result and goes on in the same session.
        run_id = made["id"]
        scripted_llm.load(
            script(
                "mcp-start",
                call("research-agent_start_run", run_id=run_id),
                call("research-agent_wait_run", run_id=run_id, timeout_seconds=60),
            )
        )
        place.prompt("mcp-start", session)
        started, waited = (output_of(p) for p in place.tool_parts(session)[1:])
        assert started["id"] == run_id and started["status"] in ("queued", "running")
        assert waited["ended"] is True, waited
        assert (waited["status"], waited["exit_code"]) == ("done", 0), waited

        listed = httpx.get(
            f"{web.url}/api/runs",
            params={"sweep_id": sweep.pk},
            headers={"X-Auth-Token": token},
            timeout=10,
        )
        assert listed.status_code == 200, listed.text
        assert [(r["id"], r["status"]) for r in listed.json()] == [(run_id, "done")]
    finally:
        place.disconnect("research-agent")
        place.close()
        daemon.stop()
        web.stop()


def test_a_server_killed_mid_call_is_a_tool_error_and_the_loops_next_prompt_restarts_it(
    project, scripted_llm
):
    mark = marker(30)
    scripted_llm.load(
        {
            "turns": [
                *script("kill-mid-call", call(BASH, command=f"sleep {mark}", timeout_seconds=60))[
                    "turns"
                ],
                *script("after-the-kill", call(LIST))["turns"],
                *script("after-connect", call(LIST))["turns"],
            ]
        }
    )
    try:
        with ThreadPoolExecutor(1) as pool:
            asked = pool.submit(project.prompt, "kill-mid-call")
            wait_until(lambda: processes_with(mark), 60, message="the call's sleep to start")
            [server] = research_servers(project.path)
            server.kill()
            session = asked.result(timeout=60)
        [part] = project.tool_parts(session)
        assert part["state"]["status"] == "error", part["state"]
        assert part["state"]["error"] == "MCP error -32000: Connection closed"
        failed = {"status": "failed", "error": "Connection closed"}
        assert project.mcp_status()["research-agent"] == failed

        # OpenCode does not start it again for a new session: the tool is simply gone.
        session = project.prompt("after-the-kill")
        [part] = project.tool_parts(session)
        assert part["tool"] == "invalid", part
        assert f"unavailable tool '{LIST}'" in part["state"]["output"]
        assert research_servers(project.path) == []
        assert project.mcp_status()["research-agent"] == failed

        # A research loop's next prompt (OpenCodeGateway.ask) starts it again first, and
        # the fresh server kills what the killed one left running.
        gateway = loop_gateway(project, "after the kill")

        async def next_prompt():
            try:
                session = await gateway.ensure_session("")
                return session, await gateway.ask(session, "after-connect")
            finally:
                await gateway.aclose()

        session, reply = asyncio.run(next_prompt())
        assert [c["tool"] for c in reply.tool_calls] == [LIST], reply.tool_calls
        assert project.mcp_status()["research-agent"] == {"status": "connected"}
        [fresh] = research_servers(project.path)
        assert fresh.pid != server.pid
        [part] = project.tool_parts(session)
        assert "notes.md" in [e["name"] for e in output_of(part)["entries"]]
        wait_until(lambda: not processes_with(mark), 5, message="the orphaned command to go")
    finally:
        kill_all(processes_with(mark))


def test_a_loop_that_is_over_leaves_no_mcp_server_in_its_worktree(project, scripted_llm):
    """OpenCode starts a directory's MCP servers at its first prompt there and keeps them (a
    Python process each) until it stops: a `make run` up for weeks kept one for every loop
    that ever ran in a worktree of its own. A loop that ends lets OpenCode go of it; its
    session and what it said stay readable."""
    scripted_llm.load(script("before-the-end", call(LIST)))
    gateway = loop_gateway(project, "a loop about to end")

    async def ask_then_end():
        try:
            session = await gateway.ensure_session("")
            reply = await gateway.ask(session, "before-the-end")
            assert len(research_servers(project.path)) == 1  # the loop's tools, while it runs
            await gateway.release_workdir()
            return session, reply
        finally:
            await gateway.aclose()

    session, reply = asyncio.run(ask_then_end())
    assert [c["tool"] for c in reply.tool_calls] == [LIST], reply.tool_calls
    wait_until(lambda: research_servers(project.path) == [], 10, message="its MCP server to stop")
    [part] = project.tool_parts(session)
    assert "notes.md" in [e["name"] for e in output_of(part)["entries"]]
