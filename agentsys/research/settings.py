"""A research loop's settings, read from its agent config and checked once:
a bad value fails the loop at its start, saying which, never in its tenth iteration."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from agentsys.opencode import Timeouts

AUTONOMY_LEVELS = ("cautious", "balanced", "full")
DEFAULT_SKILLS_DIR = Path(__file__).resolve().parents[2] / "skills"


class BadResearchSettings(ValueError):
    pass


@dataclass(frozen=True)
class ResearchSettings:
    workdir: Path
    skills_dir: Path
    max_iterations: int = 25
    wait_seconds: float = 30.0
    autonomy_level: str = "balanced"
    evo_sweep_enabled: bool = False
    model_provider: str = "demo"
    model_id: str = "demo-research"
    opencode_url: str = ""
    experiment_timeout_s: float = 3600.0
    pause_seconds: float = 2.0  # between iterations that ran experiments or said nothing
    max_model_failures: int = 3  # in a row, before the loop fails
    timeouts: Timeouts = field(default_factory=Timeouts)

    @classmethod
    def from_config(cls, config: dict) -> ResearchSettings:
        try:
            workdir = Path(config.get("workdir") or os.environ.get("AGENTSYS_WORKDIR") or ".")
            settings = cls(
                workdir=workdir.resolve(),
                skills_dir=Path(config.get("skills_dir") or DEFAULT_SKILLS_DIR),
                max_iterations=_number(config, "max_iterations", 25, int, 1),
                wait_seconds=_number(config, "wait_seconds", 30.0, float, 0),
                autonomy_level=str(config.get("autonomy_level") or "balanced"),
                evo_sweep_enabled=bool(config.get("evo_sweep_enabled", False)),
                model_provider=str(
                    config.get("model_provider") or os.environ.get("MODEL_PROVIDER") or "demo"
                ),
                model_id=str(
                    config.get("model_id") or os.environ.get("MODEL_ID") or "demo-research"
                ),
                opencode_url=str(
                    config.get("opencode_url") or os.environ.get("OPENCODE_URL") or ""
                ),
                experiment_timeout_s=_number(config, "experiment_timeout_s", 3600.0, float, 1),
                pause_seconds=_number(config, "pause_seconds", 2.0, float, 0),
                max_model_failures=_number(config, "max_model_failures", 3, int, 1),
                timeouts=_timeouts(config.get("timeouts") or {}),
            )
        except (TypeError, ValueError) as error:
            raise BadResearchSettings(f"bad research settings: {error}") from None
        if settings.autonomy_level not in AUTONOMY_LEVELS:
            raise BadResearchSettings(
                f"autonomy_level must be one of {', '.join(AUTONOMY_LEVELS)}, "
                f"got {settings.autonomy_level!r}"
            )
        if not settings.workdir.is_dir():
            raise BadResearchSettings(f"workdir {settings.workdir} is not a directory")
        if not settings.opencode_url:
            raise BadResearchSettings("no OpenCode server: set OPENCODE_URL or start `make run`")
        return settings

    def public(self) -> dict:
        """What the API shows (no secrets are in here)."""
        data = asdict(self)
        data["workdir"], data["skills_dir"] = str(self.workdir), str(self.skills_dir)
        return data


def _env(name: str, default: str) -> str:
    return os.environ.get(name) or default


def _number(config: dict, name: str, default, kind, minimum):
    value = config.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value!r}")
    return kind(value)


# Timeouts()'s defaults, unless the deployment (or a test) sets its own.
TIMEOUT_VARIABLES = {
    "first_token": "MODEL_FIRST_TOKEN_TIMEOUT",
    "total": "MODEL_RESPONSE_TIMEOUT",
    "idle": "MODEL_IDLE_TIMEOUT",
}


def _timeouts(raw) -> Timeouts:
    if not isinstance(raw, dict):
        raise TypeError(f"timeouts must be an object, got {raw!r}")
    base = Timeouts()
    from_env = {
        name: float(os.environ[variable])
        for name, variable in TIMEOUT_VARIABLES.items()
        if os.environ.get(variable)
    }
    defaults = Timeouts(**{**vars(base), **from_env})
    return Timeouts(
        first_token=_number(raw, "first_token", defaults.first_token, float, 0.01),
        total=_number(raw, "total", defaults.total, float, 0.01),
        idle=_number(raw, "idle", defaults.idle, float, 0.01),
    )
