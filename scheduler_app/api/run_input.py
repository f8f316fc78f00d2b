"""What a new run must say, checked as it comes in: POST /api/runs's body (RunIn), with its
code, SLURM options and loss thresholds, and the checks a sweep's and a loop's run settings
share (scheduler_app.api.sweeps, research_app.api). A mistake is a 422 saying which field and
why, not a run that fails at its start."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from ninja import Schema
from pydantic import ConfigDict, Field, StringConstraints, field_validator, model_validator

from agentsys.code_snapshot import MAX_PATCH_BYTES, CodeError, check_commit, check_remote
from agentsys.metric_sources.stdout import MAX_PATTERN_LENGTH, compile_pattern
from agentsys.run_env import check_env, check_venv
from agentsys.scheduling import validate_requires
from agentsys.slurm.client import SlurmError
from agentsys.slurm.client import check_options as check_slurm_options
from agentsys.stop_rules import parse as parse_stop_rules


def _optional(kind, **limits):
    return Annotated[kind, Field(**limits)] | None


class LossThresholdsIn(Schema):
    """The executor's loss alerts (defaults in agentsys.metrics.AnomalyThresholds)."""

    model_config = ConfigDict(extra="forbid")

    high_loss: _optional(float, gt=0, allow_inf_nan=False) = None
    spike_factor: _optional(float, gt=0, le=1e6, allow_inf_nan=False) = None
    window: _optional(int, strict=True, ge=1, le=10_000) = None
    quiet_seconds: _optional(float, ge=0, le=86_400, allow_inf_nan=False) = None
    min_points: _optional(int, strict=True, ge=1, le=10_000) = None


EXECUTOR_OPTIONS = {
    "env",
    "venv",
    "max_retries",
    "retry_base_delay",
    "thresholds",
    "metrics_pattern",
    "backend",
    "slurm",
    "stop_when",
}


class SlurmOptionsIn(Schema):
    """sbatch options of a SLURM run; unset ones take the deployment's AGENTSYS_SLURM_*."""

    model_config = ConfigDict(extra="forbid")

    partition: _optional(str, max_length=200) = None
    account: _optional(str, max_length=200) = None
    time_limit: _optional(str, max_length=40) = Field(
        None, description="sbatch --time: MM, HH:MM:SS or D-HH:MM:SS"
    )
    qos: _optional(str, max_length=200) = None
    constraint: _optional(str, max_length=500) = None

    @model_validator(mode="after")
    def _sbatch_reads_them(self):
        try:
            check_slurm_options(**self.dict(exclude_none=True))
        except SlurmError as error:
            raise ValueError(str(error)) from None
        return self


# Params become ` --key=value` on the command line: option names, scalar values, and a total
# that a command line holds (a 2 MB value used to fail the run at start, not the request).
PARAM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
MAX_PARAMS = 200
MAX_PARAMS_BYTES = 64 * 1024


def check_params(params: dict[str, Any]) -> dict[str, Any]:
    if len(params) > MAX_PARAMS:
        raise ValueError(f"at most {MAX_PARAMS} params, got {len(params)}")
    size = 0
    for key, value in params.items():
        if not PARAM_NAME.fullmatch(key):
            raise ValueError(
                f"param name {key[:100]!r} is not an option name (letters, digits, _ . -)"
            )
        if isinstance(value, dict | list) or value is None:
            raise ValueError(f"param {key!r} must be a string, number or boolean")
        size += len(key) + len(str(value).encode()) + 4
    if size > MAX_PARAMS_BYTES:
        raise ValueError(f"params take {size} bytes; at most {MAX_PARAMS_BYTES} fit a command")
    return params


STOP_WHEN_HELP = (
    "Stop rules, checked as each metric row is read; the first met stops the run (`stopped`, "
    'with `stopped_by` saying which and the value): {"metric": "loss", "above": 2.0, '
    '"after_step": 100}, {"metric": "loss", "below": 0.01}, {"metric": "loss", "nan": true}, '
    '{"metric": "val_loss", "no_improvement_steps": 500, "mode": "min", "min_delta": 0.001}, '
    '{"wall_seconds": 3600}'
)


def check_stop_when(rules: list | None) -> list | None:
    """A rule that cannot be read is a 422 naming it (agentsys.stop_rules.parse), with its
    defaults (mode, min_delta) filled in for the executor."""
    return None if rules is None else parse_stop_rules(rules)


def check_metrics_pattern(pattern: str | None) -> str | None:
    """A pattern that cannot read the run's output is the caller's mistake: a 422 saying why
    (agentsys.metric_sources.stdout.compile_pattern), not a run that charts nothing."""
    if pattern is not None:
        compile_pattern(pattern)
    return pattern


class RunCodeIn(Schema):
    """The code a run runs, for a script whose workdir is on another machine."""

    model_config = ConfigDict(extra="forbid")

    commit: str = Field(description="The full git commit id (40 hex digits)", max_length=64)
    remote: _optional(str, max_length=1000) = Field(
        None,
        description="Where a host fetches the commit (a git URL or an absolute path); needed "
        "unless an earlier run stored the commit's bundle",
    )
    patch: _optional(str, max_length=MAX_PATCH_BYTES) = Field(
        None, description="Uncommitted changes, as `git diff --binary HEAD` writes them"
    )

    @field_validator("commit")
    @classmethod
    def _a_commit_id(cls, commit: str) -> str:
        return _said(check_commit, commit)

    @field_validator("remote")
    @classmethod
    def _a_git_url(cls, remote: str | None) -> str | None:
        return remote and _said(check_remote, remote)


def _said(check, value: str) -> str:
    try:
        return check(value)
    except CodeError as error:
        raise ValueError(str(error)) from None


class RunIn(Schema):
    model_config = ConfigDict(extra="forbid")

    name: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]
    command: Annotated[
        str, StringConstraints(strip_whitespace=True, min_length=1, max_length=20_000)
    ]
    workdir: Annotated[str, StringConstraints(max_length=1000)] = ""
    gpu_required: Annotated[int, Field(strict=True, ge=0, le=1024)] = 0
    requires: dict[str, Any] = Field(
        default_factory=dict,
        description="Host labels it needs: a number is a minimum, a string is found in the "
        'host\'s value, e.g. {"gpu_model": "H100", "gpu_memory_gb": 40}',
    )
    params: dict[str, Any] = Field(
        default_factory=dict,
        description="appended as ` --key=value`: option names, scalar values, 64 KiB in all",
    )
    sweep_id: str | None = Field(
        None,
        description="The sweep it joins; unset, a research loop's token puts it in its loop's "
        "(which may name only its loop's own sweeps)",
    )
    chat_session_id: str | None = None
    auto_start: bool = False
    env: dict[str, Any] | None = Field(
        None,
        description="Environment variables of its command, over its sweep's, e.g. "
        '{"HF_HOME": "/data/hf", "SEED": 1}',
    )
    venv: str | None = Field(
        None,
        description="The virtual environment its command runs in (relative to the workdir, or "
        "absolute); unset: the workdir's .venv/ when it has one. AgentSys's own never",
    )
    max_retries: _optional(int, strict=True, ge=0, le=100) = Field(
        None, description="GPU-conflict retries (default 3)"
    )
    retry_base_delay: _optional(float, ge=0, le=3600, allow_inf_nan=False) = Field(
        None, description="Seconds before the first retry, doubling after (default 5)"
    )
    thresholds: LossThresholdsIn | None = None
    metrics_pattern: _optional(str, max_length=MAX_PATTERN_LENGTH) = Field(
        None,
        description=(
            "A regex with named groups read on each line the run prints: each group whose "
            "text is a number is a metric, a group named step the step, e.g. "
            r"`it (?P<step>\d+) cost (?P<cost>\S+)`"
        ),
    )

    backend: Literal["subprocess", "slurm"] | None = Field(
        None,
        description="subprocess: this deployment's GPU hosts; slurm: an sbatch job (SLURM "
        "places it and its GPUs). Unset: AGENTSYS_RUN_BACKEND",
    )
    slurm: SlurmOptionsIn | None = Field(None, description="sbatch options (backend slurm)")
    stop_when: list[Any] | None = Field(
        None, max_length=50, description=STOP_WHEN_HELP + "; unset: its sweep's"
    )
    code: RunCodeIn | None = Field(
        None,
        description="The git commit (and uncommitted patch) to run, when the workdir is not on "
        "the server's disk; unset: recorded from the workdir where the server sees it",
    )

    _params_fit_a_command_line = field_validator("params")(check_params)
    _env_is_variables = field_validator("env")(check_env)
    _venv_is_a_path = field_validator("venv")(check_venv)
    _requires_are_labels = field_validator("requires")(validate_requires)
    _metrics_pattern_compiles = field_validator("metrics_pattern")(check_metrics_pattern)
    _stop_rules_read = field_validator("stop_when")(check_stop_when)

    def executor_options(self) -> dict:
        """What goes to the run's executor: the options given, without the unset ones."""
        return self.dict(include=EXECUTOR_OPTIONS, exclude_none=True)
