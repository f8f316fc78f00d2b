"""The README lists every MCP tool of the servers with its arguments, as the tools say them
(agentsys.mcp.tool_list): a tool added, renamed or given another argument fails here until
`python -m agentsys.mcp.tool_list --write README.md` is run."""

from pathlib import Path

import pytest

from agentsys.mcp import tool_list

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readmes_tool_list_is_what_the_tools_say():
    listed = tool_list.in_readme(README.read_text())

    assert listed is not None, "README.md lost its mcp-tools markers"
    assert listed == tool_list.tool_list(), (
        "README.md's MCP tool list differs from the tools: run "
        "`python -m agentsys.mcp.tool_list --write README.md`"
    )


def test_the_list_names_every_tool_and_argument_of_both_servers():
    text = tool_list.tool_list()

    for name in ("quick_bash", "create_run", "create_runs", "wait_run", "squeue", "sbatch"):
        assert f"- `{name}(" in text
    assert (
        '`create_run(name, command, params=null, gpu_required=0, workdir="", env=null, '
        'venv="", requires=null, sweep_id="", stop_when=null, auto_start=false)`'
    ) in text


def test_the_approval_tools_are_listed_as_a_persons_only():
    text = tool_list.tool_list()
    agents, clients = text.split("`slurm`:")[0], text.split(tool_list.CLIENTS_HEADING)[1]

    assert "approve_research" not in agents and "list_approvals" not in agents
    assert "- `approve_research(loop_id, add=null)`" in clients
    assert "- `list_approvals(limit=50)`" in clients
    assert "create_run(" not in clients  # research-agent's tools are not listed twice


def test_writing_replaces_only_what_is_between_the_markers():
    readme = f"# Top\n\n{tool_list.START}\n- old\n{tool_list.END}\n\nAfter.\n"

    again = tool_list.written(readme, "- new\n")

    assert again == f"# Top\n\n{tool_list.START}\n- new\n{tool_list.END}\n\nAfter.\n"
    assert tool_list.in_readme(again) == "- new\n"
    with pytest.raises(ValueError, match="markers"):
        tool_list.written("# no markers\n", "- new\n")


def test_the_approval_tool_names_every_cap_there_is():
    from agentsys.mcp.approval_tools import AMOUNTS
    from agentsys.research.budget import CAPS

    described = AMOUNTS.__metadata__[0].description
    assert all(cap in described for cap in CAPS), described
