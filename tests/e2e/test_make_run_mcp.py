"""`make run` wires AgentSys's MCP servers into the workdir's opencode.json (merged with what a
person put there) and says what OpenCode made of each: on the console, on /api/health and on
the settings page, a failed one with its fix (issue 23, part 3). Real OpenCode, real servers."""

import json
import signal
import subprocess
import sys

import httpx
import pytest

from tests.e2e.test_make_run import OutputReader, _login
from tests.helpers import REPO, child_env, free_port, wait_until

pytestmark = pytest.mark.slow
THEIRS = {"type": "local", "command": ["/nonexistent/their-tool", "--serve"], "enabled": True}


def _project(folder):
    work = folder / "project"
    work.mkdir()
    mine = {"$schema": "https://opencode.ai/config.json", "mcp": {"their-tool": THEIRS}}
    (work / "opencode.json").write_text(json.dumps(mine))
    (work / "notes.md").write_text("a person's project\n")
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "start"]):
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=work, check=True
        )
    return work


@pytest.mark.timeout(360)  # make run and OpenCode starts: see tests/e2e/test_make_run.py
def test_make_run_merges_the_mcp_servers_and_says_how_each_fares(migrated_home):
    home, port = migrated_home, free_port()
    work = _project(home.parent)
    env = child_env(
        AGENTSYS_HOME=str(home),
        PORT=str(port),
        DATABASE_URL=None,
        AGENTSYS_ADMIN_PASSWORD=None,
        AGENTSYS_WORKDIR=str(work),
        OPENCODE_URL=None,
        MODEL_PROVIDER="demo",
        AGENTSYS_API_TOKEN=None,
    )
    make = subprocess.Popen(
        ["make", "run"], cwd=REPO, env=env, text=True, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    output = OutputReader(make.stdout)
    try:
        wait_until(lambda: output.find("Ctrl-C stops everything"), 300, 0.2, "the banner")
        print(output.text)
        said = output.find(r"MCP servers in (\S+): (.*)$")
        assert said and said.group(1) == str(work / "opencode.json"), output.text
        assert "research-agent: added" in said.group(2)

        config = json.loads((work / "opencode.json").read_text())
        assert config["mcp"]["their-tool"] == THEIRS  # a person's entry, as they wrote it
        ours = config["mcp"]["research-agent"]
        assert ours["command"][0].startswith(str(REPO)) and ours["command"][0].endswith("python")
        assert ours["command"][1:] == ["-m", "agentsys.mcp.research_server", "--workdir", str(work)]
        token = output.find(r"API token for 'admin' \(shown only this once\): (\S+)").group(1)
        text = (work / "opencode.json").read_text()
        assert token not in text and "TOKEN" not in text.upper()  # the workdir is committed

        # The console: each server as OpenCode runs it, the failed one with its fix.
        assert output.find(r"MCP servers of \S+ \(OpenCode\): .*research-agent connected"), (
            output.text
        )
        failed = output.find(r"MCP server their-tool failed: ENOENT.*Fix: .*does not exist")
        assert failed, output.text

        url = f"http://127.0.0.1:{port}"
        body = httpx.get(f"{url}/api/health", headers={"X-Auth-Token": token}, timeout=10).json()
        servers = body["mcp"]["servers"]
        assert servers["research-agent"] == {"status": "connected"}
        assert servers["their-tool"]["status"] == "failed"
        assert "/nonexistent/their-tool" in servers["their-tool"]["error"]
        assert "their-tool" in servers["their-tool"]["fix"]
        assert any(w.startswith("MCP server their-tool failed") for w in body["warnings"])

        login = output.find(r"Log in as '(\w+)' with the one-time password: (\S+)")
        with httpx.Client(base_url=url, timeout=10) as client:
            assert _login(client, *login.groups()).status_code == 302
            page = client.get("/settings/").text
        assert "their-tool" in page and "research-agent" in page and "Fix: " in page
    finally:
        make.send_signal(signal.SIGTERM)
        make.wait(60)
    assert "Stopped." in output.text
    print(f"python: {sys.executable}")
