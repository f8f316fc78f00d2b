"""A real OpenCode server, started and stopped by AgentSys (`make run`, tests, benchmarks).

The binary is the one `npm ci` installed from the project's package-lock.json. Its state (its
own SQLite, config, caches) lives under `state_dir`, with HOME and the XDG dirs pointed there:
it never reads or writes the person's own OpenCode setup, and nothing phones home.
"""

from __future__ import annotations

import json
import os
import platform
import secrets
import signal
import socket
import subprocess
import time
from pathlib import Path

from agentsys.opencode.client import health_now

REPO = Path(__file__).resolve().parents[2]
OFFLINE_ENV = {
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_SHARE": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    "OPENCODE_DISABLE_EXTERNAL_SKILLS": "1",
    "OPENCODE_DISABLE_CLAUDE_CODE": "1",
    "OPENCODE_DISABLE_EMBEDDED_WEB_UI": "1",
    # OpenCode's event bus gains a listener per /event subscriber: past 10 (ten agents, or ten
    # browser tabs) its runtime printed a 40-line MaxListenersExceededWarning, an object dump,
    # on the console of `make run`. It is not a leak; its warnings say nothing an operator
    # acts on, so they are off (errors still print).
    "NODE_NO_WARNINGS": "1",
}
# Without project config OpenCode reads no opencode.json of the directories it works in: only
# OPENCODE_CONFIG_CONTENT (ours). With it, a workdir's opencode.json (its MCP servers, a
# person's own settings) is merged under ours: our provider and model still win.
NO_PROJECT_CONFIG = {"OPENCODE_DISABLE_PROJECT_CONFIG": "1"}
DEMO_PROVIDER, DEMO_MODEL = "demo", "demo-research"
# The demo model's price in USD per million tokens (OpenCode's `cost`), a mid-range hosted
# model's: OpenCode prices every step with it, so a newcomer's ledger shows money spent.
DEMO_PRICE = {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75}


class OpenCodeStartError(RuntimeError):
    pass


def opencode_binary(root: Path = REPO) -> Path:
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(
        platform.machine().lower(), platform.machine().lower()
    )
    return root / "node_modules" / f"opencode-linux-{arch}" / "bin" / "opencode"


def provider_config(*, provider: str, model: str, demo_base_url: str | None = None) -> dict:
    """OpenCode's config: the demo provider (the project's scripted model at
    `demo_base_url`, the /v1 URL) or a provider OpenCode knows (its key from the env)."""
    config = {
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": False,
        "share": "disabled",
        "permission": {"bash": "allow", "edit": "allow"},
        "lsp": False,
        "formatter": False,
        # OpenCode's own snapshots copy the worktree into a shadow git store before and after
        # every model step (for its undo); AgentSys records each run's code itself, and in a
        # researcher's project that copy is work and disk spent on every step.
        "snapshot": False,
        "model": f"{provider}/{model}",
        "small_model": f"{provider}/{model}",
        "enabled_providers": [provider],
    }
    if provider == DEMO_PROVIDER or demo_base_url:
        config["provider"] = {
            provider: {
                "npm": "@ai-sdk/openai-compatible",
                "name": "AgentSys demo model" if provider == DEMO_PROVIDER else provider,
                "options": {"baseURL": demo_base_url, "apiKey": "sk-local"},
                "models": {
                    model: {
                        "name": model,
                        "tool_call": True,
                        "reasoning": True,
                        "limit": {"context": 128000, "output": 8192},
                        "cost": DEMO_PRICE,
                    }
                },
            }
        }
    return config


# OpenCode adds its plugin SDK to every config directory it loads and installs it from the npm
# registry, in the background, unless that directory's package-lock.json already names it (its
# Npm.install skips a directory whose lock lists every dependency). Its global config directory
# is ours (HOME is the state dir) and holds no plugin: AgentSys configures none. Without this
# each fresh state dir downloaded ~30 MB (~5 CPU-seconds) at its first model step, and an
# offline machine logged a failed install; a workdir's own .opencode directory is left alone.
PLUGIN_SDK = "@opencode-ai/plugin"


def _nothing_to_install(config_dir: Path) -> None:
    lock = config_dir / "package-lock.json"
    if lock.exists():  # an earlier start's, or a real install's: either is enough
        return
    (config_dir / "node_modules").mkdir(parents=True, exist_ok=True)
    lock.write_text(json.dumps({"packages": {"": {"dependencies": {PLUGIN_SDK: "*"}}}}) + "\n")


# OpenCode's catalogue of every provider and model it knows (models.dev, a few MB of JSON
# bundled in the binary) is parsed again for each directory it works in, at that directory's
# first prompt: ~0.9 CPU-s of its ~1.2 on this machine, once for every research loop's
# worktree (and every test's project). Where our config describes each provider we enable in
# full (the demo model, a provider at its own base URL), the catalogue says nothing we use, so
# OpenCode reads an empty one instead. A provider OpenCode knows by name keeps the
# catalogue: its models' limits and prices come from it.
EMPTY_CATALOGUE = "models-none.json"


def _catalogue_env(config: dict, state_dir: Path) -> dict[str, str]:
    described = set(config.get("provider") or {})
    enabled = set(config.get("enabled_providers") or ())
    if not enabled or not enabled <= described:
        return {}
    catalogue = state_dir / EMPTY_CATALOGUE
    catalogue.write_text("{}\n")
    return {"OPENCODE_MODELS_PATH": str(catalogue)}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LocalOpenCode:
    def __init__(
        self,
        *,
        state_dir: Path,
        workdir: Path,
        config: dict,
        password: str | None = None,
        port: int | None = None,
        binary: Path | None = None,
        project_config: bool = False,
    ):
        """`project_config`: read the opencode.json of the directories it works in (their MCP
        servers); off, only `config` counts."""
        self.state_dir, self.workdir, self.config = Path(state_dir), Path(workdir), config
        self.project_config = project_config
        self.password = password or secrets.token_urlsafe(24)
        self.port = port or free_port()
        self.binary = binary or opencode_binary()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def environment(self) -> dict[str, str]:
        home = self.state_dir / "home"
        dirs = {
            "HOME": home,
            "XDG_CONFIG_HOME": home / ".config",
            "XDG_DATA_HOME": home / ".local" / "share",
            "XDG_CACHE_HOME": home / ".cache",
            "XDG_STATE_HOME": home / ".local" / "state",
        }
        for path in dirs.values():
            path.mkdir(parents=True, exist_ok=True)
        _nothing_to_install(dirs["XDG_CONFIG_HOME"] / "opencode")
        return {
            **os.environ,
            **{k: str(v) for k, v in dirs.items()},
            **OFFLINE_ENV,
            **({} if self.project_config else NO_PROJECT_CONFIG),
            **_catalogue_env(self.config, self.state_dir),
            "OPENCODE_CONFIG_CONTENT": json.dumps(self.config),
            "OPENCODE_SERVER_PASSWORD": self.password,
            "OPENCODE_SERVER_USERNAME": "opencode",
        }

    def command(self) -> list[str]:
        return [str(self.binary), "serve", "--port", str(self.port), "--hostname", "127.0.0.1"]

    def start(self, timeout: float = 60.0) -> str:
        if not self.binary.exists():
            raise OpenCodeStartError(
                f"the OpenCode binary is missing ({self.binary}): run `make setup` (npm ci)"
            )
        self.state_dir.mkdir(parents=True, exist_ok=True)
        log = (self.state_dir / "opencode.log").open("ab")
        self.process = subprocess.Popen(
            self.command(),
            cwd=self.workdir,
            env=self.environment(),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # stop() ends it with everything it started
        )
        log.close()
        self.wait_healthy(timeout)
        return self.url

    def wait_healthy(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise OpenCodeStartError(
                    f"OpenCode exited with code {self.process.returncode} on start:\n"
                    + self.log_tail()
                )
            answer = health_now(self.url, username="opencode", password=self.password)
            if answer is not None:
                return answer
            time.sleep(0.1)
        self.stop()
        raise OpenCodeStartError(
            f"OpenCode did not answer within {timeout:g} s:\n{self.log_tail()}"
        )

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = (self.state_dir / "opencode.log").read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, grace: float = 5.0) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                return
            try:
                process.wait(wait)
                return
            except subprocess.TimeoutExpired:
                continue
