"""The environment a run's command gets.

A run is the researcher's code, run as they would run it in their project: with the project's
virtual environment, never AgentSys's. So, from the daemon's own environment:

1. AgentSys's virtual environment is taken out (its `bin/` from PATH, its VIRTUAL_ENV), and so
   are AgentSys's own secrets (the database URL, the Django secret key, OpenCode's password):
   a training script has no business with them.
2. The project's virtual environment goes first on PATH, VIRTUAL_ENV naming it: the one the
   run names by `venv` (relative to its workdir, or absolute), else the workdir's own `.venv/`
   when it has one. A `venv` that names no virtual environment fails the run, saying so.
3. The run's own `env` (from the run, its batch, its sweep or its research loop) goes last:
   what a person sets wins, PATH included.

The executor then sets what AgentSys owns (CUDA_VISIBLE_DEVICES, AGENTSYS_RUN_DIR, the
trackers' directories) over all of it.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path

# Never handed to a run: they open AgentSys's database and its model server.
AGENTSYS_SECRETS = frozenset(
    {"DATABASE_URL", "DJANGO_SECRET_KEY", "OPENCODE_SERVER_PASSWORD", "AGENTSYS_ADMIN_PASSWORD"}
)
DEFAULT_VENV = ".venv"
# Set by the executor over anything given: the GPUs it was placed on, where it logs, its marker.
SET_BY_AGENTSYS = frozenset(
    {"CUDA_VISIBLE_DEVICES", "AGENTSYS_RUN_DIR", "AGENTSYS_RUN_ID", "WANDB_DIR", "WANDB_RUN_ID"}
)
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,254}")
MAX_ENV_BYTES = 64 * 1024
MAX_VENV_LENGTH = 1000


class RunEnvironmentError(ValueError):
    """The run's environment cannot be made as it asks (a `venv` that is none)."""


def check_env(env: object) -> dict[str, str] | None:
    """A run's `env` as given (API, MCP, a sweep, a loop): variable names to strings (a number
    or a boolean is written as a string), or None when none is given. ValueError with one
    sentence naming what is wrong."""
    if env is None:
        return None
    if not isinstance(env, dict):
        raise ValueError("env must be an object of variable names to values")
    checked, size = {}, 0
    for name, value in env.items():
        if not isinstance(name, str) or not ENV_NAME.fullmatch(name):
            raise ValueError(f"env name {str(name)[:100]!r} is not a variable name")
        if name in SET_BY_AGENTSYS:
            raise ValueError(f"env {name} is set by AgentSys for each run; it cannot be given")
        if isinstance(value, dict | list) or value is None:
            raise ValueError(f"env {name} must be a string, number or boolean")
        text = str(value).lower() if isinstance(value, bool) else str(value)
        if "\0" in text:
            raise ValueError(f"env {name} holds a NUL character")
        checked[name] = text
        size += len(name) + len(text.encode()) + 2
    if size > MAX_ENV_BYTES:
        raise ValueError(f"env takes {size} bytes; at most {MAX_ENV_BYTES}")
    return checked


def check_venv(venv: object) -> str | None:
    """A run's `venv`: a path (relative to its workdir, or absolute), or none."""
    if venv is None or venv == "":
        return None
    if not isinstance(venv, str) or len(venv) > MAX_VENV_LENGTH or "\0" in venv:
        raise ValueError(f"venv must be a path of at most {MAX_VENV_LENGTH} characters")
    return venv


def agentsys_venv() -> Path | None:
    """The virtual environment AgentSys itself runs in, if it runs in one."""
    return Path(sys.prefix) if sys.prefix != sys.base_prefix else None


def project_venv(workdir: Path, venv: str | None) -> Path | None:
    """The virtual environment the run's command gets: `venv` (relative to the workdir, or
    absolute) when given, else the workdir's `.venv/` when there is one; None for neither."""
    if venv:
        named = Path(venv).expanduser()
        named = named if named.is_absolute() else workdir / named
        if not (named / "bin" / "python").exists():
            raise RunEnvironmentError(
                f"venv {venv!r} is not a virtual environment: no {named / 'bin' / 'python'}"
            )
        return named
    found = workdir / DEFAULT_VENV
    return found if (found / "bin" / "python").exists() else None


def run_environment(
    base: Mapping[str, str],
    *,
    workdir: Path,
    venv: str | None = None,
    env: Mapping[str, object] | None = None,
) -> dict[str, str]:
    """The command's environment, from `base` (the daemon's): the module's steps 1 to 3."""
    result = {k: v for k, v in base.items() if k not in AGENTSYS_SECRETS}
    own = agentsys_venv()
    if own is not None:
        if result.get("VIRTUAL_ENV") and Path(result["VIRTUAL_ENV"]) == own:
            del result["VIRTUAL_ENV"]
        result["PATH"] = _without(result.get("PATH", os.defpath), own / "bin")
    project = project_venv(workdir, venv)
    if project is not None:
        result["VIRTUAL_ENV"] = str(project)
        result["PATH"] = os.pathsep.join(
            [str(project / "bin"), *filter(None, [result.get("PATH")])]
        )
        result.pop("PYTHONHOME", None)  # would send the venv's python to another library
    result.update({str(k): str(v) for k, v in (env or {}).items()})
    return result


def _without(path: str, directory: Path) -> str:
    kept = [entry for entry in path.split(os.pathsep) if entry and Path(entry) != directory]
    return os.pathsep.join(kept)
