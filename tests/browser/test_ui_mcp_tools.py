"""The demo model's research loop uses AgentSys's MCP tools (issue 23): through the real
OpenCode, its first iteration lists the workdir (research-agent_list_directory) and, with the
run tools configured, a later one reads a finished run (list_runs, get_run). Each call shows
as a tool part on the loop's page and under the loop's end in the chat, live and reloaded.
Real daphne, runagentd, OpenCode, MCP server and Chromium; screenshots in
test-artifacts/screenshots/ (mcp-loop-tools*, mcp-chat-tools)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from agentsys.mcp.opencode_config import merge_servers, server_entries
from research_app.models import ResearchLoop
from tests.chromium import chat_ready, screenshot
from tests.helpers import wait_until
from tests.live_clients import TOKEN

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
LIST = "research-agent_list_directory"
GET_RUN = "research-agent_get_run"


@pytest.fixture
def demo_model(scripted_llm):
    scripted_llm.demo = True
    yield scripted_llm
    scripted_llm.demo = False


def _tool(locator, name: str):
    return locator.locator("details.tool").filter(has_text=name)


def test_the_demo_loop_calls_the_mcp_tools_seen_on_its_page_and_in_the_chat(
    site_in_workdir, make_daemon, demo_model, workdir
):
    url, context, page = site_in_workdir
    # Before anything asks OpenCode about this workdir: it reads opencode.json once. The run
    # tools need AgentSys's address and a token (here the test's; an agent's own is to come).
    entries = server_entries(workdir, slurm=False)
    entries["research-agent"]["environment"].update(AGENTSYS_URL=url, AGENTSYS_API_TOKEN=TOKEN)
    merge_servers(workdir, entries)
    make_daemon()

    page.goto(f"{url}/chat/")
    page.get_by_role("button", name="New chat").click()
    chat_ready(page)
    page.get_by_label("wild").check()
    page.get_by_role("textbox", name="Message").fill("Which learning rate suits train.py?")
    page.keyboard.press("Enter")
    expect(page.locator(".action-card")).to_contain_text("Started a research loop", timeout=60_000)
    loop = wait_until(ResearchLoop.objects.first, 30, message="the loop")

    # The loop's end reaches the open chat live, its tool calls under the line.
    ended = page.locator("article.msg.system")
    expect(ended.locator(".notice-text")).to_contain_text("ended: done", timeout=180_000)
    listed = _tool(ended, LIST)
    expect(listed).to_have_count(1)
    expect(listed.locator(".pill")).to_have_text("completed")
    listed.locator("summary").click()
    expect(listed.locator(".tool-io")).to_contain_text('"train.py"')
    # Each iteration with new results reads the newest finished run: the 2nd and the 3rd at
    # least. How many have new results depends on when the runs end (a loop wakes at the
    # first end and takes those that end within seconds of it), so the chat is checked
    # against the loop's own record.
    loop.refresh_from_db()
    history = [s for s in loop.state["history"] if s["phase"] == "iteration"]
    reads = [c for s in history for c in s["tool_calls"] if c["tool"] == GET_RUN]
    assert len(reads) >= 2
    expect(_tool(ended, GET_RUN)).to_have_count(len(reads))
    screenshot(page, "mcp-chat-tools")
    page.reload()  # and as the server renders it
    expect(_tool(page.locator("article.msg.system"), LIST)).to_have_count(1)

    first, second = history[0], history[1]
    assert [c["tool"] for c in first["tool_calls"]] == [LIST]
    assert first["tool_calls"][0]["status"] == "completed"
    assert [c["tool"] for c in second["tool_calls"]] == [
        "research-agent_list_runs",
        GET_RUN,
    ]
    read = second["tool_calls"][1]
    assert read["status"] == "completed" and read["input"]["run_id"] in read["output"]
    tree = workdir / ".agents" / "worktrees" / loop.agent_id  # where the loop works
    log = (tree / ".agents" / "wild" / loop.agent_id / "iteration_log.md").read_text()
    assert f"- tools called:\n  - {LIST} (completed)" in log  # what the chat agent is told

    tab = context.new_page()
    tab.goto(f"{url}/research/{loop.agent_id}/")
    iteration = tab.locator("article.iteration").filter(has_text="Iteration 1 ")
    expect(_tool(iteration, LIST)).to_have_count(1)
    _tool(iteration, LIST).locator("summary").click()
    expect(_tool(iteration, LIST).locator(".tool-io")).to_contain_text('"train.py"')
    later = tab.locator("article.iteration").filter(has_text="Iteration 2 ")
    expect(_tool(later, GET_RUN)).to_have_count(1)
    screenshot(tab, "mcp-loop-tools")
    iteration.scroll_into_view_if_needed()
    tab.set_viewport_size({"width": 390, "height": 844})
    screenshot(tab, "mcp-loop-tools-phone")
