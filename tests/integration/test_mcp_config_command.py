"""`manage.py mcp_config`: the workdir's opencode.json gets AgentSys's MCP servers, merged into
what is there, and says what it did; a file it cannot merge is an error naming it, untouched."""

import json

import pytest
from django.core.management import CommandError, call_command


def test_it_merges_and_says_what_it_did(tmp_path, capsys):
    (tmp_path / "opencode.json").write_text(json.dumps({"mcp": {"mine": {"type": "remote"}}}))
    call_command("mcp_config", workdir=str(tmp_path))
    out = capsys.readouterr().out
    assert f"{tmp_path / 'opencode.json'}: research-agent: added" in out
    servers = json.loads((tmp_path / "opencode.json").read_text())["mcp"]
    assert servers["mine"] == {"type": "remote"} and "research-agent" in servers


def test_a_file_it_cannot_merge_is_an_error_and_left_alone(tmp_path):
    (tmp_path / "opencode.json").write_text("{oops")
    with pytest.raises(CommandError, match="not readable JSON"):
        call_command("mcp_config", workdir=str(tmp_path))
    assert (tmp_path / "opencode.json").read_text() == "{oops"
    with pytest.raises(CommandError, match="is not a directory"):
        call_command("mcp_config", workdir=str(tmp_path / "missing"))
