"""Issue 23, part 1 so far: the research-agent MCP server's quick_bash and list_directory,
called through FastMCP's own client (the real MCP protocol, in memory) and, once, over stdio
as a subprocess the way OpenCode starts it."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport

from agentsys.mcp.research_server import build_server
from agentsys.mcp.workdir_tools import OUTPUT_CAP
from agentsys.proctree import all_processes


def call(root, tool, **arguments):
    async def go():
        async with Client(build_server(root)) as client:
            return await client.call_tool(tool, arguments, raise_on_error=False)

    return asyncio.run(go())


def ok(root, tool, **arguments) -> dict:
    result = call(root, tool, **arguments)
    assert not result.is_error, result.content
    return result.structured_content


def refused(root, tool, **arguments) -> str:
    result = call(root, tool, **arguments)
    assert result.is_error, result.structured_content
    return result.content[0].text


def _processes_with(token: str) -> list[int]:
    """Live processes whose command line holds `token`."""
    found = []
    for process in all_processes():
        try:
            cmdline = Path(f"/proc/{process.pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if process.state != "Z" and token.encode() in cmdline:
            found.append(process.pid)
    return found


def test_quick_bash_returns_output_and_exit_code(tmp_path):
    (tmp_path / "sub").mkdir()
    result = ok(tmp_path, "quick_bash", command="pwd; echo oops >&2; exit 3", workdir="sub")
    assert result["exit_code"] == 3 and not result["timed_out"]
    assert result["stdout"] == f"{tmp_path / 'sub'}\n" and result["stderr"] == "oops\n"
    assert not result["truncated"] and result["note"] == ""


def test_quick_bash_past_its_timeout_kills_the_command_and_every_child(tmp_path):
    token = f"sleep 3{os.getpid() % 1000}7"  # a sleep only this test starts
    command = f"{token} & setsid {token} & {token}; echo never"
    started = time.monotonic()
    result = ok(tmp_path, "quick_bash", command=command, timeout_seconds=1)
    assert time.monotonic() - started < 10
    assert result["timed_out"] and result["exit_code"] is None
    assert "killed" in result["note"] and "never" not in result["stdout"]
    assert _processes_with(token) == []  # the one that left the session with setsid too


def test_quick_bash_caps_its_output_and_says_where(tmp_path):
    result = ok(tmp_path, "quick_bash", command="head -c 300000 /dev/zero | tr '\\0' x")
    assert result["truncated"] and len(result["stdout"]) == OUTPUT_CAP
    assert result["stdout_bytes"] == 300000
    assert f"stdout cut at {OUTPUT_CAP} of 300000 bytes" in result["note"]


def test_quick_bash_does_not_wait_for_what_the_command_left_running(tmp_path):
    token = f"sleep 4{os.getpid() % 1000}1"
    started = time.monotonic()
    result = ok(tmp_path, "quick_bash", command=f"{token} & echo started")
    assert time.monotonic() - started < 10
    assert result["exit_code"] == 0 and result["stdout"] == "started\n"
    assert _processes_with(token) == []


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        ({"command": ""}, "non-empty"),
        ({"command": "true", "timeout_seconds": 0}, "greater than 0"),
        ({"command": "true", "timeout_seconds": 121}, "less than or equal to 120"),
        ({"command": "true", "timeout_seconds": "soon"}, "valid number"),
        ({"command": "x" * 1_000_000}, "at most"),
        ({"command": "echo a\0b"}, "NUL"),
        ({"command": "true", "workdir": ".."}, "outside the workdir"),
        ({"command": "true", "workdir": "/etc"}, "outside the workdir"),
        ({}, "command"),
        ({"command": ["ls"]}, "valid string"),
    ],
)
def test_quick_bash_refuses_bad_arguments_saying_why(tmp_path, arguments, words):
    assert words in refused(tmp_path, "quick_bash", **arguments)


def test_list_directory_lists_sorted_paged_and_hides_dotfiles(tmp_path):
    for name in ("b.py", "a.txt", ".secret"):
        (tmp_path / name).write_text("12345")
    (tmp_path / "data").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "a.txt")
    listing = ok(tmp_path, "list_directory")
    assert listing["entries"] == [
        {"name": "a.txt", "type": "file", "size": 5},
        {"name": "b.py", "type": "file", "size": 5},
        {"name": "data", "type": "directory"},
        {"name": "link", "type": "symlink"},
    ]
    assert listing["total"] == 4 and not listing["more"]
    hidden = ok(tmp_path, "list_directory", include_hidden=True, offset=0, limit=2)
    assert [e["name"] for e in hidden["entries"]] == [".secret", "a.txt"]
    assert hidden["total"] == 5 and hidden["more"]


def test_list_directory_of_ten_thousand_files_is_paged(tmp_path):
    big = tmp_path / "big"
    big.mkdir()
    for index in range(10_000):
        (big / f"f{index:05d}").touch()
    started = time.monotonic()
    page = ok(tmp_path, "list_directory", path="big", offset=9_000, limit=1000)
    elapsed = time.monotonic() - started
    assert page["total"] == 10_000 and len(page["entries"]) == 1000 and not page["more"]
    assert page["entries"][0]["name"] == "f09000"
    assert elapsed < 5, elapsed  # generous: a sanity bound, the figure is the benchmark's


def test_list_directory_refuses_every_escape(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "out").symlink_to(tmp_path)
    (work / "afile").write_text("x")
    for path in ("..", "../work/..", "/etc", str(tmp_path), "out", "out/other"):
        assert "outside the workdir" in refused(work, "list_directory", path=path), path
    assert "through a symlink" in refused(work, "list_directory", path="out")
    assert "NUL" in refused(work, "list_directory", path="a\0b")
    assert "over 255 bytes" in refused(work, "list_directory", path="x" * 300)
    assert "at most 4096" in refused(work, "list_directory", path="a/" * 3000)
    assert "not a directory" in refused(work, "list_directory", path="afile")
    assert "not a directory" in refused(work, "list_directory", path="missing")
    assert ok(work, "list_directory", path=str(work))["path"] == "."  # absolute inside: fine


def test_the_server_runs_over_stdio_as_opencode_starts_it(tmp_path):
    (tmp_path / "hello.txt").write_text("hi")

    async def go():
        transport = StdioTransport(
            command=sys.executable,
            args=["-m", "agentsys.mcp.research_server", "--workdir", str(tmp_path)],
            cwd=str(os.getcwd()),
        )
        async with Client(transport) as client:
            tools = {tool.name for tool in await client.list_tools()}
            listing = await client.call_tool("list_directory", {})
            bash = await client.call_tool("quick_bash", {"command": "cat hello.txt"})
            runs = await client.call_tool("list_runs", {}, raise_on_error=False)
            return tools, listing.structured_content, bash.structured_content, runs

    tools, listing, bash, runs = asyncio.run(go())
    assert {"quick_bash", "list_directory", "create_run", "start_run", "wait_run"} <= tools
    # No token in its environment: the run tools use the research loop's (none runs here).
    assert runs.is_error and "no research loop is running in" in runs.content[0].text
    assert listing["entries"] == [{"name": "hello.txt", "type": "file", "size": 2}]
    assert bash["stdout"] == "hi"
