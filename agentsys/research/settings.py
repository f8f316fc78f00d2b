"""A research loop's settings, read from its agent config and checked once:
a bad value fails the loop at its start, saying which, never in its tenth iteration."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from agentsys.deployment import Deployment
from agentsys.opencode import Timeouts
from agentsys.research import budget
from agentsys.research.run_wakes import parse_wake_when
from agentsys.stop_rules import parse as parse_stop_rules

AUTONOMY_LEVELS = ("cautious", "balanced", "full")
WAKE_ON = ("each", "all")
DEFAULT_STOP_WHEN = ({"metric": "loss", "nan": True},)
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
    max_experiments_per_iteration: int = 8  # one reply's; the rest are refused with a note
    metrics_pattern: str = ""  # for the printed lines of its experiments (the sweep's)
    # Where its experiments run ("slurm": sbatch jobs; "" = the deployment's default) and
    # their sbatch options.
    run_backend: str = ""
    slurm_options: dict = field(default_factory=dict)
    run_env: dict = field(default_factory=dict)  # its experiments' environment variables
    run_venv: str = ""  # their virtual environment ("": the workdir's .venv/, if any)
    # Its branch starts with the person's uncommitted changes (else from their HEAD only).
    include_uncommitted: bool = False
    commit_allow: tuple[str, ...] = ()  # output patterns its commits take all the same
    budget: dict = field(default_factory=dict)  # its caps (agentsys.research.budget)
    # A balanced loop asks before a batch needing more GPUs than this (batch_approval), and
    # any loop stops when nobody answers its approval within approval_timeout_s.
    approval_gpus: int = 4
    approval_timeout_s: float = 86400.0
    timeouts: Timeouts = field(default_factory=Timeouts)
    # "each": the loop reads its experiments' results as they end, and is asked again while
    # the others go on; "all": it waits for the whole batch, as before.
    wake_on: str = "each"
    # With "each", also what its runs do while they go on (agentsys.research.run_wakes):
    # "alert", {"metric": "loss", "below": 0.1}; () for their ends alone.
    wake_when: tuple = ()
    # Its experiments' stop rules (agentsys.stop_rules): by default a NaN or inf loss ends a
    # run at once, and the loop is woken by it.
    stop_when: tuple = DEFAULT_STOP_WHEN

    @classmethod
    def from_config(cls, config: dict, deployment: Deployment | None = None) -> ResearchSettings:
        """`config` is the agent's own; what it leaves out comes from the deployment."""
        deployment = deployment or Deployment()
        try:
            workdir = Path(config.get("workdir") or deployment.workdir or ".")
            settings = cls(
                workdir=workdir.resolve(),
                skills_dir=Path(config.get("skills_dir") or DEFAULT_SKILLS_DIR),
                max_iterations=_number(config, "max_iterations", 25, int, 1),
                wait_seconds=_number(config, "wait_seconds", 30.0, float, 0),
                autonomy_level=str(config.get("autonomy_level") or "balanced"),
                evo_sweep_enabled=bool(config.get("evo_sweep_enabled", False)),
                model_provider=str(
                    config.get("model_provider") or deployment.model_provider or "demo"
                ),
                model_id=str(config.get("model_id") or deployment.model_id or "demo-research"),
                opencode_url=str(config.get("opencode_url") or deployment.opencode_url or ""),
                experiment_timeout_s=_number(config, "experiment_timeout_s", 3600.0, float, 1),
                pause_seconds=_number(config, "pause_seconds", 2.0, float, 0),
                max_model_failures=_number(config, "max_model_failures", 3, int, 1),
                max_experiments_per_iteration=_number(
                    config, "max_experiments_per_iteration", 8, int, 1
                ),
                metrics_pattern=str(config.get("metrics_pattern") or ""),
                run_backend=str(config.get("backend") or ""),
                slurm_options=dict(config.get("slurm") or {}),
                run_env=dict(config.get("env") or {}),
                run_venv=str(config.get("venv") or ""),
                include_uncommitted=bool(config.get("include_uncommitted", False)),
                commit_allow=_patterns(config.get("commit_allow") or ()),
                budget=budget.checked(config.get("budget")),
                approval_gpus=_number(config, "approval_gpus", 4, int, 0),
                approval_timeout_s=_number(config, "approval_timeout_s", 86400.0, float, 1),
                timeouts=_timeouts(config.get("timeouts") or {}, deployment.timeouts),
                wake_on=str(config.get("wake_on") or "each"),
                wake_when=parse_wake_when(config.get("wake_when")),
                stop_when=_stop_when(config.get("stop_when")),
            )
        except (TypeError, ValueError) as error:
            raise BadResearchSettings(f"bad research settings: {error}") from None
        if settings.wake_on not in WAKE_ON:
            raise BadResearchSettings(f"wake_on must be each or all, got {settings.wake_on!r}")
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

    def run_options(self) -> dict:
        """What every experiment's executor gets from the loop (its sweep's settings)."""
        options = {
            "metrics_pattern": self.metrics_pattern,
            "backend": self.run_backend,
            "slurm": self.slurm_options,
            "env": self.run_env,
            "venv": self.run_venv,
            "stop_when": list(self.stop_when),
        }
        return {key: value for key, value in options.items() if value}

    def public(self) -> dict:
        """What the API shows (no secrets are in here)."""
        data = asdict(self)
        data["workdir"], data["skills_dir"] = str(self.workdir), str(self.skills_dir)
        return data


def _number(config: dict, name: str, default, kind, minimum):
    value = config.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value!r}")
    return kind(value)


def _stop_when(raw) -> tuple:
    """The loop's rules for its experiments: unset, the default (a NaN loss stops a run);
    [] for none."""
    if raw is None:
        return DEFAULT_STOP_WHEN
    return tuple(parse_stop_rules(raw))


def _patterns(raw) -> tuple[str, ...]:
    if isinstance(raw, str) or not all(isinstance(p, str) and p for p in raw):
        raise TypeError(f"commit_allow must be a list of file patterns, got {raw!r}")
    return tuple(raw)


def _timeouts(raw, defaults: Timeouts) -> Timeouts:
    """The agent's own timeouts, each defaulting to the deployment's (Timeouts()'s own
    unless MODEL_*_TIMEOUT set others)."""
    if not isinstance(raw, dict):
        raise TypeError(f"timeouts must be an object, got {raw!r}")
    return Timeouts(
        first_token=_number(raw, "first_token", defaults.first_token, float, 0.01),
        total=_number(raw, "total", defaults.total, float, 0.01),
        idle=_number(raw, "idle", defaults.idle, float, 0.01),
    )
