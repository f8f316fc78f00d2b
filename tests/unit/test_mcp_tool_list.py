"""The README lists every MCP tool of both servers with its arguments, as the tools say them
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
        'venv="", requires=null, sweep_id="", auto_start=false)`'
    ) in text


def test_writing_replaces_only_what_is_between_the_markers():
    readme = f"# Top\n\n{tool_list.START}\n- old\n{tool_list.END}\n\nAfter.\n"

    again = tool_list.written(readme, "- new\n")

    assert again == f"# Top\n\n{tool_list.START}\n- new\n{tool_list.END}\n\nAfter.\n"
    assert tool_list.in_readme(again) == "- new\n"
    with pytest.raises(ValueError, match="markers"):
        tool_list.written("# no markers\n", "- new\n")
