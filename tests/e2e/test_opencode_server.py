"""OpenCode is a real component the project installs and starts (issue 10 item 2): the pinned
binary from npm, its state isolated, behind a password, stopped with nothing left."""

import httpx

from agentsys.opencode.server import LocalOpenCode, opencode_binary, provider_config
from tests.helpers import REPO, pid_alive, wait_until


def test_the_pinned_binary_is_installed_by_setup():
    lock = (REPO / "package-lock.json").read_text()
    assert '"node_modules/opencode-ai": {\n      "version": "1.18.33"' in lock
    assert opencode_binary().exists(), "make setup installs it (npm)"


def test_the_server_answers_with_its_version_only_with_the_password(opencode_server):
    url = opencode_server.url
    health = httpx.get(f"{url}/global/health", auth=("opencode", opencode_server.password))
    assert health.json() == {"healthy": True, "version": "1.18.33"}
    assert httpx.get(f"{url}/global/health").status_code == 401
    assert httpx.get(f"{url}/global/health", auth=("opencode", "wrong")).status_code == 401


def test_its_state_stays_in_its_own_directory(opencode_server):
    state = opencode_server.process.state_dir
    assert (state / "home" / ".local" / "share" / "opencode").is_dir()


def test_a_prompt_in_a_git_project_leaves_no_snapshot_of_it(opencode_server, tmp_path):
    """OpenCode's own undo snapshots (a copy of the worktree before and after each model step)
    are off: AgentSys records each run's code itself; in a researcher's project they were work
    and disk spent on every step."""
    import asyncio
    import subprocess

    from agentsys.opencode.client import OpenCodeClient

    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text("print('loss=1.0')\n")
    for args in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "start"]):
        git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args]
        subprocess.run(git, cwd=project, check=True)

    async def one_prompt():
        client = OpenCodeClient(opencode_server.url, password=opencode_server.password)
        try:
            session = await client.create_session(directory=str(project))
            return await client.prompt(
                session,
                "Say hello.",
                provider=opencode_server.provider,
                model=opencode_server.model,
                directory=str(project),
            )
        finally:
            await client.aclose()

    assert asyncio.run(one_prompt()).text
    data = opencode_server.process.state_dir / "home" / ".local" / "share" / "opencode"
    assert not (data / "snapshot").exists(), sorted(p.name for p in data.iterdir())


def test_it_fetches_nothing_from_the_npm_registry(opencode_server):
    """OpenCode installs its plugin SDK into its config directory at a first model step, from
    the npm registry; AgentSys configures no plugin, so its OpenCode stays offline (an offline
    machine logged the failure; an online one spent ~30 MB and 5 CPU-seconds per state dir)."""
    _one_prompt(opencode_server)
    home = opencode_server.process.state_dir / "home"
    assert not (home / ".npm").exists(), sorted((home / ".npm").rglob("*"))[:5]
    assert not list((home / ".config" / "opencode" / "node_modules").iterdir())


def _one_prompt(opencode_server) -> str:
    import asyncio

    from agentsys.opencode.client import OpenCodeClient

    async def prompt():
        client = OpenCodeClient(opencode_server.url, password=opencode_server.password)
        try:
            session = await client.create_session()
            answer = await client.prompt(
                session,
                "Say hello.",
                provider=opencode_server.provider,
                model=opencode_server.model,
            )
            return answer.text
        finally:
            await client.aclose()

    return asyncio.run(prompt())


def test_a_missing_binary_says_to_run_make_setup(tmp_path):
    server = LocalOpenCode(
        state_dir=tmp_path / "s",
        workdir=tmp_path,
        config=provider_config(provider="demo", model="demo-research", demo_base_url="http://x/v1"),
        binary=tmp_path / "nope",
    )
    try:
        server.start(timeout=5)
    except RuntimeError as error:
        assert "make setup" in str(error)
    else:
        raise AssertionError("started without a binary")


def test_stop_leaves_no_process(tmp_path, scripted_llm):
    server = LocalOpenCode(
        state_dir=tmp_path / "s",
        workdir=tmp_path,
        config=provider_config(
            provider="demo", model="demo-research", demo_base_url=scripted_llm.base_url + "/v1"
        ),
    )
    server.start()
    pid = server.pid
    server.stop()
    wait_until(lambda: not pid_alive(pid), 10, message="opencode to exit")


def test_a_provider_of_its_own_or_a_local_server():
    hosted = provider_config(provider="anthropic", model="claude-sonnet-4-5")
    assert hosted["model"] == "anthropic/claude-sonnet-4-5" and "provider" not in hosted
    local = provider_config(provider="local", model="qwen", demo_base_url="http://h:11434/v1")
    assert local["provider"]["local"]["options"]["baseURL"] == "http://h:11434/v1"
    assert local["enabled_providers"] == ["local"]


def test_many_event_subscribers_print_no_warning_dump(opencode_server):
    """More than ten /global/event subscribers (agents, tabs) made OpenCode print a 40-line
    MaxListenersExceededWarning on the console of `make run`."""
    import threading
    import time

    auth = ("opencode", opencode_server.password)
    done = threading.Event()

    def subscribe():
        url = f"{opencode_server.url}/global/event"
        try:
            with httpx.stream("GET", url, auth=auth, timeout=5) as stream:
                for _ in stream.iter_lines():
                    if done.is_set():
                        return
        except httpx.HTTPError:  # the read timeout of a quiet feed: it was subscribed
            return

    threads = [threading.Thread(target=subscribe, daemon=True) for _ in range(14)]
    for thread in threads:
        thread.start()
    log = opencode_server.process.state_dir / "opencode.log"
    try:
        wait_until(lambda: log.read_text().count("\n") >= 1, 10, message="opencode's log")
        time.sleep(3)  # the warning came within a second of the eleventh subscriber
    finally:
        done.set()
    text = log.read_text()
    assert "MaxListenersExceededWarning" not in text and "emitter:" not in text, text[-2000:]


def _models_listed(server: LocalOpenCode) -> dict[str, dict]:
    server.start()
    try:
        answer = httpx.get(
            f"{server.url}/config/providers", auth=("opencode", server.password), timeout=10
        )
        return {p["id"]: p["models"] for p in answer.json()["providers"]}
    finally:
        server.stop()


def test_a_provider_opencode_knows_keeps_its_catalogue_of_models(tmp_path, monkeypatch):
    """A hosted provider's models, their context limits and prices, come from OpenCode's
    catalogue: the empty one the demo model gets (its first prompt in each directory parsed
    the whole catalogue) must not reach a server that needs it."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-not-a-real-key")
    hosted = LocalOpenCode(
        state_dir=tmp_path / "hosted",
        workdir=tmp_path,
        config=provider_config(provider="anthropic", model="claude-sonnet-4-5"),
    )
    models = _models_listed(hosted)["anthropic"]
    assert models["claude-sonnet-4-5"]["limit"]["context"] >= 200_000


def test_a_provider_our_config_describes_needs_no_catalogue(tmp_path, scripted_llm):
    base_url = scripted_llm.base_url + "/v1"
    local = LocalOpenCode(
        state_dir=tmp_path / "local",
        workdir=tmp_path,
        config=provider_config(provider="local", model="qwen", demo_base_url=base_url),
    )
    assert "OPENCODE_MODELS_PATH" in local.environment()
    models = _models_listed(local)
    assert list(models) == ["local"]
    assert models["local"]["qwen"]["limit"] == {"context": 128000, "output": 8192}
