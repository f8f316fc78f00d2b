"""Issue 23, part 3: OpenCode's `GET /mcp` answer read into what a person sees, each server
in trouble with its fix in one line. The answers below are the shapes OpenCode 1.18.33 gave
(seen on the real server: tests/integration/test_health.py asks it)."""

from __future__ import annotations

import json

from agentsys.mcp.opencode_config import merge_servers, server_entries
from agentsys.mcp.status import read_status, trouble

SEEN = {
    "research-agent": {"status": "connected"},
    "broken": {
        "status": "failed",
        "error": "ENOENT: no such file or directory, posix_spawn '/nonexistent/python'",
    },
    "exits": {"status": "failed", "error": "MCP error -32000: Connection closed"},
    "off": {"status": "disabled"},
}


def _workdir(tmp_path, python="/gone/venv/bin/python"):
    entries = server_entries(tmp_path, python=python, slurm=False)
    entries["broken"] = {"type": "local", "command": ["/nonexistent/python"]}
    entries["exits"] = {"type": "local", "command": ["python3", "-c", "raise SystemExit"]}
    merge_servers(tmp_path, entries)
    return tmp_path


def test_connected_and_disabled_are_fine_and_each_failure_gets_its_fix(tmp_path):
    work = _workdir(tmp_path)
    found = read_status(SEEN, work)
    assert found["ok"] is False
    servers = found["servers"]
    assert servers["research-agent"] == {"status": "connected"}
    assert servers["off"] == {"status": "disabled"}
    assert servers["broken"]["error"].startswith("ENOENT")
    assert "(/nonexistent/python) does not exist" in servers["broken"]["fix"]
    assert f"{work / 'opencode.json'}" in servers["exits"]["fix"]
    lines = trouble(found)
    assert len(lines) == 2 and all("\n" not in line for line in lines)
    assert lines[0].startswith("MCP server broken failed: ENOENT") and "Fix: " in lines[0]
    assert read_status({"research-agent": {"status": "connected"}}, work)["ok"] is True


def test_our_own_server_failing_says_how_to_write_its_entry_again(tmp_path):
    work = _workdir(tmp_path)
    missing = read_status(
        {"research-agent": {"status": "failed", "error": "ENOENT: posix_spawn '/gone/…'"}}, work
    )["servers"]["research-agent"]["fix"]
    assert "/gone/venv/bin/python does not exist" in missing
    assert f"manage.py mcp_config --workdir {work}" in missing and "make run" in missing
    # It started and died (a python without our packages): run its command by hand to see.
    died = read_status(
        {"research-agent": {"status": "failed", "error": "MCP error -32000: Connection closed"}},
        work,
    )["servers"]["research-agent"]["fix"]
    entry = json.loads((work / "opencode.json").read_text())["mcp"]["research-agent"]
    assert "PYTHONPATH=" in died and " ".join(entry["command"]) in died
    assert "manage.py mcp_config" in died


def test_an_answer_of_the_wrong_shape_is_shown_not_trusted(tmp_path):
    found = read_status({"x": "garbage", "y": {"status": 3}, 7: None, "z": {}}, tmp_path)
    assert found["ok"] is False
    assert {s["status"] for s in found["servers"].values()} == {"unknown"}
    assert all("fix" in s for s in found["servers"].values())
    huge = read_status({"a": {"status": "failed", "error": "e" * 10**6}}, tmp_path)
    assert len(huge["servers"]["a"]["error"]) == 500


def test_not_known_yet_is_no_trouble_but_garbage_is():
    assert trouble({"ok": False, "directory": "/w", "timed_out": True, "error": "slow"}) == []
    lines = trouble({"ok": False, "directory": "/w", "error": "no status object: 'x'"})
    assert lines == ["MCP status of /w: no status object: 'x'"]


async def test_a_slow_or_silent_opencode_shows_the_last_answer_with_its_age(monkeypatch):
    """On a busy machine one question to OpenCode may take longer than a page waits: the page
    then showed "Not known" for servers it had named a second before."""
    from agentsys.mcp import status

    clock = [1000.0]
    answers = []

    async def ask(url, workdir, **kwargs):
        return answers.pop(0)

    monkeypatch.setattr(status.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(status, "workdir_mcp_status", ask)
    status.forget()
    servers = {"theirs": {"status": "failed", "error": "ENOENT", "fix": "fix it"}}
    answers.append({"ok": False, "directory": "/w", "servers": servers})
    check = dict(url="http://oc", workdir="/w", username="u", password="p")
    first = await status.mcp_check(**check)
    assert first["servers"] == servers and "known_seconds_ago" not in first

    clock[0] += 12
    slow = "no answer to GET /mcp within 1.5 s (it may still be starting them)"
    answers.append({"ok": False, "directory": "/w", "timed_out": True, "error": slow})
    later = await status.mcp_check(**check)
    assert later["servers"] == servers
    assert later["known_seconds_ago"] == 12 and later["unanswered"] == slow
    assert status.mcp_warnings(later) == ["MCP server theirs failed: ENOENT. Fix: fix it"]

    clock[0] += 1  # OpenCode's own check failed: not asked, the last answer still shown
    silent = await status.mcp_check(**check, opencode_ok=False)
    assert silent["servers"] == servers and silent["known_seconds_ago"] == 13
    assert silent["unanswered"].startswith("not asked")

    clock[0] += status.KNOWN_SECONDS  # too old to show
    answers.append({"ok": False, "directory": "/w", "timed_out": True, "error": slow})
    too_old = await status.mcp_check(**check)
    assert "servers" not in too_old and too_old["error"] == slow and answers == []
    status.forget()
