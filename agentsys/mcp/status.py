"""OpenCode's view of a workdir's MCP servers (issue 23, part 3): its `GET /mcp` answer for
the workdir, each server connected or failed with OpenCode's error and the fix in one line.
`make run` says it at start; `/api/health` and the settings page show it.

OpenCode starts a workdir's MCP servers the first time something asks about that directory
(seconds for a Python server), then keeps them: a caller that must stay fast gives a short
timeout and reads a timeout as "not known yet", not as a failure of the servers.

The pages ask through `mcp_check`: the banner polls /api/health every few seconds, so an
answer is kept for a few seconds and the question has a short timeout, and neither a slow nor
a dead OpenCode slows a page. When OpenCode does not answer in that time (a busy machine), a
page shows its last answer of the past minute with its age, not "not known": the servers did
not change because one question was slow.
"""

from __future__ import annotations

import json
import shlex
import time
from pathlib import Path

from agentsys.mcp.opencode_config import CONFIG_FILE, SERVERS
from agentsys.opencode import OpenCodeAuthError, OpenCodeClient, OpenCodeError, OpenCodeUnavailable

FINE = {"connected", "disabled"}  # OpenCode's other states: failed, needs_auth,
# needs_client_registration (each with its error), and anything newer it may add
ERROR_CHARS = 500
RECONFIGURE = ".venv/bin/python manage.py mcp_config"
MCP_TIMEOUT_SECONDS = 1.5  # a page's question (/api/health, the settings page)
KEEP_SECONDS = 5.0  # how long a page's answer is kept
NOT_ASKED = "not asked: OpenCode is not answering"
KNOWN_SECONDS = 60.0  # how long it is shown, with its age, while OpenCode does not answer
_answers: dict[tuple[str, str], tuple[float, dict]] = {}


async def workdir_mcp_status(
    base_url: str, workdir: str | Path, *, username: str, password: str, timeout: float
) -> dict:
    """{"ok", "directory", "servers": {name: {"status", "error"?, "fix"?}}}; or, when
    OpenCode could not be asked or answered garbage, {"ok": False, "directory", "error"}
    ("timed_out": True when it did not answer in time). Never raises."""
    workdir = Path(workdir)
    found = {"directory": str(workdir)}
    client = OpenCodeClient(base_url, username=username, password=password, call_timeout=timeout)
    try:
        answer = await client.mcp_status(str(workdir))
    except OpenCodeAuthError:
        return {**found, "ok": False, "error": "OpenCode answered 401 (wrong password)"}
    except OpenCodeUnavailable as error:
        timed_out = "did not answer" in str(error)
        if timed_out:
            error = f"no answer to GET /mcp within {timeout:g} s (it may still be starting them)"
        return {**found, "ok": False, "timed_out": timed_out, "error": str(error)}
    except OpenCodeError as error:
        return {**found, "ok": False, "error": str(error)[:ERROR_CHARS]}
    finally:
        await client.aclose()
    return {**found, **read_status(answer, workdir)}


def read_status(answer: dict, workdir: Path) -> dict:
    """OpenCode's `GET /mcp` object made safe to show, a fix added to each server in trouble."""
    entries = configured_servers(workdir)
    servers = {}
    for name, raw in sorted(answer.items(), key=lambda item: str(item[0])):
        name = str(name)[:200]
        status = raw.get("status") if isinstance(raw, dict) else None
        error = raw.get("error") if isinstance(raw, dict) else None
        if not isinstance(status, str) or not status:
            status, error = "unknown", f"OpenCode gave no status: {str(raw)[:200]}"
        server = {"status": status[:100]}
        if error is not None:
            server["error"] = str(error)[:ERROR_CHARS]
        if status not in FINE:
            error = server.get("error", "")
            server["fix"] = fix_for(name, status, error, entries.get(name), workdir)
        servers[name] = server
    return {"ok": not any("fix" in s for s in servers.values()), "servers": servers}


def configured_servers(workdir: Path) -> dict:
    """The `mcp` entries of the workdir's opencode.json ({} when there is none to read)."""
    try:
        config = json.loads((workdir / CONFIG_FILE).read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        return {}
    servers = config.get("mcp") if isinstance(config, dict) else None
    return servers if isinstance(servers, dict) else {}


def fix_for(name: str, status: str, error: str, entry, workdir: Path) -> str:
    """What to do about a server in trouble, in one line."""
    path = workdir / CONFIG_FILE
    if status.startswith("needs_"):
        return f'give the "{name}" entry in {path} its credentials (clientId / headers)'
    command = entry.get("command") if isinstance(entry, dict) else None
    if not isinstance(command, list) or not command or not all(isinstance(c, str) for c in command):
        command = None
    missing = "ENOENT" in error or "no such file" in error.lower()
    rerun = f"`{RECONFIGURE} --workdir {shlex.quote(str(workdir))}`, then restart `make run`"
    if name in SERVERS:
        if missing and command:
            return f"its interpreter {command[0]} does not exist: run {rerun}"
        if command:
            return (
                f"run `{_by_hand(command, entry)}` to see why it stops (a python without "
                f"AgentSys's packages?), then {rerun}"
            )
        return f"its entry in {path} has no command: run {rerun}"
    if missing and command:
        return (
            f'the command of "{name}" in {path} ({command[0]}) does not exist: fix it, '
            'or set "enabled": false'
        )
    return f'check the "{name}" entry in {path} (or set "enabled": false), then restart `make run`'


def _by_hand(command: list[str], entry: dict) -> str:
    environment = entry.get("environment") if isinstance(entry.get("environment"), dict) else {}
    env = [f"{k}={shlex.quote(str(v))}" for k, v in environment.items() if isinstance(k, str)]
    return " ".join([*env, shlex.join(command)])


def trouble(check: dict) -> list[str]:
    """One line per thing a person should act on: a server in trouble with its fix, or
    OpenCode answering /mcp with garbage. Nothing while OpenCode is still starting them."""
    if "servers" not in check:
        if check.get("timed_out"):
            return []
        return [f"MCP status of {check.get('directory', '?')}: {check.get('error', 'unknown')}"]
    lines = []
    for name, server in check["servers"].items():
        if "fix" in server:
            why = f": {server['error']}" if server.get("error") else ""
            lines.append(f"MCP server {name} {server['status']}{why}. Fix: {server['fix']}")
    return lines


async def mcp_check(
    url: str, workdir: str | Path, *, username: str, password: str, opencode_ok: bool = True
) -> dict:
    """For a page: each MCP server of the workdir (connected, failed with its error and fix),
    an answer of the last few seconds kept; not asked while OpenCode itself is not answering
    (its own check says so). Without a fresh answer, the last one of the past minute, with
    `known_seconds_ago` and `unanswered` (why there is no fresh one)."""
    workdir = str(workdir)
    key = (url, workdir)
    kept = _answers.get(key)
    age = time.monotonic() - kept[0] if kept is not None else None
    if age is not None and age < KEEP_SECONDS:
        return kept[1]
    if not opencode_ok or not url:
        answer = {"ok": False, "directory": workdir, "error": NOT_ASKED}
    else:
        answer = await workdir_mcp_status(
            url, workdir, username=username, password=password, timeout=MCP_TIMEOUT_SECONDS
        )
    if "servers" in answer:
        _answers[key] = (time.monotonic(), answer)
        return answer
    if age is not None and age < KNOWN_SECONDS:
        return {**kept[1], "known_seconds_ago": round(age), "unanswered": answer["error"]}
    return answer


def mcp_warnings(check: dict) -> list[str]:
    """The health warnings of a page's check: each server in trouble with its one-line fix."""
    if check.get("error", "").startswith("not asked"):
        return []
    return trouble(check)


def forget() -> None:
    """Drop the kept answers (a test that changes what OpenCode would say)."""
    _answers.clear()
