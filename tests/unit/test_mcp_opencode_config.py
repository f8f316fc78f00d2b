"""Issue 23, part 3 begun: AgentSys's MCP servers merged into a workdir's opencode.json, a
person's own entries and settings kept, and the entry's command starting the server the way
OpenCode does (from the workdir, with none of our environment)."""

from __future__ import annotations

import asyncio
import json
import sys

import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport

from agentsys.mcp.opencode_config import REPO, ConfigRefused, merge_servers, server_entries
from tests.helpers import git


def test_a_new_file_gets_both_servers_with_the_venvs_interpreter(tmp_path):
    said = merge_servers(tmp_path, server_entries(tmp_path))
    assert said == ["research-agent: added", "slurm: added"]
    config = json.loads((tmp_path / "opencode.json").read_text())
    entry = config["mcp"]["research-agent"]
    assert entry["command"][0] == sys.executable and entry["command"][0].startswith("/")
    assert entry["command"][1:] == [
        "-m",
        "agentsys.mcp.research_server",
        "--workdir",
        str(tmp_path),
    ]
    assert merge_servers(tmp_path, server_entries(tmp_path)) == [
        "research-agent: already up to date",
        "slurm: already up to date",
    ]


def test_what_a_person_wrote_is_kept_and_our_entries_brought_up_to_date(tmp_path):
    mine = {
        "model": "anthropic/claude",
        "mcp": {
            "their-tool": {"type": "remote", "url": "http://x"},
            "research-agent": {"type": "local", "command": ["python", "old.py"], "enabled": False},
        },
    }
    (tmp_path / "opencode.json").write_text(json.dumps(mine))
    said = merge_servers(tmp_path, server_entries(tmp_path, slurm=False))
    assert said == ["research-agent: updated"]
    config = json.loads((tmp_path / "opencode.json").read_text())
    assert config["model"] == "anthropic/claude"
    assert config["mcp"]["their-tool"] == {"type": "remote", "url": "http://x"}
    assert config["mcp"]["research-agent"]["command"][0] == sys.executable
    assert config["mcp"]["research-agent"]["enabled"] is False  # their switch
    assert "slurm" not in config["mcp"]


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("{not json", "not readable JSON"),
        ("[1, 2]", "does not hold a JSON object"),
        ('{"mcp": []}', '"mcp" is not an object'),
    ],
)
def test_a_file_that_cannot_be_merged_is_left_untouched(tmp_path, text, words):
    (tmp_path / "opencode.json").write_text(text)
    with pytest.raises(ConfigRefused, match=words):
        merge_servers(tmp_path, server_entries(tmp_path))
    assert (tmp_path / "opencode.json").read_text() == text


def test_the_entry_starts_the_server_from_the_workdir_without_our_environment(tmp_path):
    (tmp_path / "notes.md").write_text("x")
    entry = server_entries(tmp_path)["research-agent"]

    async def go():
        transport = StdioTransport(
            command=entry["command"][0],
            args=entry["command"][1:],
            env=dict(entry["environment"]),  # what OpenCode passes: nothing of ours
            cwd=str(tmp_path),
        )
        async with Client(transport) as client:
            return (await client.call_tool("list_directory", {})).structured_content

    listing = asyncio.run(go())
    assert [e["name"] for e in listing["entries"]] == ["notes.md"]


def test_extra_environment_reaches_the_research_server_only(tmp_path):
    extra = {"AGENTSYS_URL": "http://127.0.0.1:1", "AGENTSYS_API_TOKEN": "t0k", "PYTHONPATH": "/x"}
    entries = server_entries(tmp_path, environment=extra)
    research = entries["research-agent"]["environment"]
    assert research["AGENTSYS_URL"] == "http://127.0.0.1:1"
    assert research["AGENTSYS_API_TOKEN"] == "t0k"
    assert research["PYTHONPATH"] == str(REPO)  # the checkout stays importable
    assert "AGENTSYS_API_TOKEN" not in entries["slurm"]["environment"]  # no token it needs not
    assert "AGENTSYS_URL" not in server_entries(tmp_path)["research-agent"]["environment"]


def test_each_entry_lets_the_longest_tool_finish_before_opencode_gives_up(tmp_path):
    # Without `timeout` OpenCode ends every MCP call at 60 s, a wait_run of 300 s included.
    from agentsys.mcp.run_tools import MAX_WAIT_S
    from agentsys.mcp.workdir_tools import MAX_TIMEOUT_S

    for entry in server_entries(tmp_path).values():
        assert entry["timeout"] >= (max(MAX_WAIT_S, MAX_TIMEOUT_S) + 10) * 1000


async def test_a_loops_worktree_gets_the_workdirs_servers_pointed_at_it(tmp_path):
    """Issue 37 §1, seen in CI: a loop working in its worktree had no MCP tools (OpenCode reads
    opencode.json per directory, and the workdir's own is not in the worktree). Its
    AgentSys servers go there pointed at the worktree; a person's own server comes as it is;
    a committed opencode.json changed there is never committed by the loop."""
    from agentsys.mcp.opencode_config import carry_servers
    from agentsys.research import branch

    work = tmp_path / "work"
    work.mkdir()
    (work / "train.py").write_text("print(1)\n")
    git("init", "-q", cwd=work)
    git("add", "-A", cwd=work)
    git("commit", "-q", "-m", "start", cwd=work)
    entries = server_entries(work, slurm=False)
    entries["theirs"] = {"type": "local", "command": ["wandb-mcp"], "enabled": True}
    merge_servers(work, entries)
    opened, _ = await branch.open_branch(work, "research-1")
    tree = opened.workdir

    assert carry_servers(work, tree) == ["research-agent: added", "theirs: added"]
    servers = json.loads((tmp_path / tree / "opencode.json").read_text())["mcp"]
    assert servers["research-agent"]["command"][-2:] == ["--workdir", str(tree)]
    assert servers["theirs"]["command"] == ["wandb-mcp"]
    assert git("status", "--porcelain", cwd=tree) == ""  # in info/exclude: no one's status

    # A committed opencode.json: the worktree's copy is changed, never shown or committed.
    git("add", "-f", "opencode.json", cwd=work)
    git("commit", "-q", "-m", "their config", cwd=work)
    second, _ = await branch.open_branch(work, "research-2")
    carry_servers(work, second.workdir)
    copy = json.loads((tmp_path / second.workdir / "opencode.json").read_text())["mcp"]
    assert copy["research-agent"]["command"][-1] == str(second.workdir)
    assert git("status", "--porcelain", cwd=second.workdir) == ""
